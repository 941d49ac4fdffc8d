    // assets[0]: data
    framefarm.value({"rendered":"main","composition":""}, "Title", "Transform.Position", [960,540]);
    // assets[1]: data
    framefarm.expression({"rendered":"main","composition":"end"}, "Logo", "Effects.Glow.Radius", "wiggle(2, 10)");
