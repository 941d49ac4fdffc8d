    // assets[0]: text
    framefarm.text({"rendered":"main","composition":""}, "Title", "Ünïcode \"quoted\"\nsecond line \u2028");
