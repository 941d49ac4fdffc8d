    // assets[0]: image
    framefarm.footage("main", "Photo", "C:\\work\\project\\framefarm-assets\\0-photo.jpg");
