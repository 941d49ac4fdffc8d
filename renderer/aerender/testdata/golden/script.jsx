    // assets[0]: script
    framefarm.script("/work/project/framefarm-assets/0-fix.jsx", {"speed":2});
