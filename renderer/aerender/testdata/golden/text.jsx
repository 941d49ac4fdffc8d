    // assets[0]: text
    framefarm.text("main", "Title", "Ünïcode \"quoted\"\nsecond line \u2028");
