    // assets[0]: data
    framefarm.value("main", "Title", "Transform.Position", [960,540]);
    // assets[1]: data
    framefarm.expression("end", "Logo", "Effects.Glow.Radius", "wiggle(2, 10)");
