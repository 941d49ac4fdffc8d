    // assets[0]: image
    framefarm.footage({"rendered":"main","composition":""}, "Photo", "C:\\work\\project\\framefarm-assets\\0-photo.jpg");
