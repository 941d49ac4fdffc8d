    // assets[0]: job
    framefarm.footage({"rendered":"main","composition":""}, "Inset", "/work/project/framefarm-assets/0-child.mp4");
