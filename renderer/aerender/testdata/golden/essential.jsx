    // assets[0]: essential
    framefarm.essential("main", "framefarm essential main", {"Headline":"Hello","Size":42});
