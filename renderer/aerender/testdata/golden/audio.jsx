    // assets[0]: audio
    framefarm.footage({"rendered":"main","composition":""}, "Music", "/work/project/framefarm-assets/0-music.wav");
