    // assets[0]: video
    framefarm.footage("main", "Clip", "/work/project/framefarm-assets/0-clip.mp4");
