    // assets[0]: job
    framefarm.footage("main", "Inset", "/work/project/framefarm-assets/0-child.mp4");
