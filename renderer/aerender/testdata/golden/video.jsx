    // assets[0]: video
    framefarm.footage({"rendered":"main","composition":""}, "Clip", "/work/project/framefarm-assets/0-clip.mp4");
