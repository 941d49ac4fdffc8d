    // assets[0]: audio
    framefarm.footage("main", "Music", "/work/project/framefarm-assets/0-music.wav");
