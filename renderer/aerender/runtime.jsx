// framefarm's ExtendScript runtime. aerender runs this file (-r) inside After Effects after it
// opens the project and before it renders; the calls generated for the job follow it and apply
// the job's assets in order. ExtendScript is ECMAScript 3: no let, no arrow functions, no JSON.

// NX is what a user's script asset reads its params from: NX.get(name).
var NX;

var framefarm = (function () {
    function fail(message) {
        throw new Error("framefarm: " + message);
    }

    function findComp(name) {
        for (var i = 1; i <= app.project.numItems; i++) {
            var item = app.project.item(i);
            if (item instanceof CompItem && item.name === name) {
                return item;
            }
        }
        fail("no composition named \"" + name + "\"");
    }

    function findLayers(compName, layerName) {
        var comp = findComp(compName);
        var found = [];
        for (var i = 1; i <= comp.numLayers; i++) {
            if (comp.layer(i).name === layerName) {
                found.push(comp.layer(i));
            }
        }
        if (found.length === 0) {
            fail("no layer named \"" + layerName + "\" in composition \"" + compName + "\"");
        }
        return found;
    }

    function eachLayer(compName, layerName, apply) {
        var layers = findLayers(compName, layerName);
        for (var i = 0; i < layers.length; i++) {
            apply(layers[i]);
        }
    }

    // findProperty follows a dotted path such as "Transform.Position" or "Effects.Glow.Radius";
    // a first part the layer lacks is looked up under Transform, so "Opacity" works too.
    function findProperty(layer, path) {
        var parts = path.split(".");
        var prop = layer.property(parts[0]);
        if (!prop && layer.property("Transform")) {
            prop = layer.property("Transform").property(parts[0]);
        }
        for (var i = 1; prop && i < parts.length; i++) {
            prop = prop.property(parts[i]);
        }
        if (!prop) {
            fail("layer \"" + layer.name + "\" has no property \"" + path + "\"");
        }
        return prop;
    }

    // setValue sets a property's value, on every keyframe when it is animated.
    function setValue(prop, value) {
        if (prop.canSetExpression) {
            prop.expression = "";
        }
        if (prop.numKeys === 0) {
            prop.setValue(value);
            return;
        }
        for (var k = 1; k <= prop.numKeys; k++) {
            prop.setValueAtKey(k, value);
        }
    }

    // editText changes the text document of every keyframe of a text layer.
    function editText(layer, edit) {
        var prop = layer.property("Source Text");
        if (!prop) {
            fail("layer \"" + layer.name + "\" is not a text layer");
        }
        prop.expression = "";
        var doc;
        if (prop.numKeys === 0) {
            doc = prop.value;
            edit(doc);
            prop.setValue(doc);
            return;
        }
        for (var k = 1; k <= prop.numKeys; k++) {
            doc = prop.keyValue(k);
            edit(doc);
            prop.setValueAtKey(k, doc);
        }
    }

    var imported = {};

    function importFile(path) {
        if (!imported[path]) {
            var file = new File(path);
            if (!file.exists) {
                fail("the file \"" + path + "\" is missing");
            }
            imported[path] = app.project.importFile(new ImportOptions(file));
        }
        return imported[path];
    }

    var wrappers = {};

    var justifications = {
        left: ParagraphJustification.LEFT_JUSTIFY,
        right: ParagraphJustification.RIGHT_JUSTIFY,
        center: ParagraphJustification.CENTER_JUSTIFY
    };

    var functions = {
        "nx:layer-remove": function (comp, p) {
            var layers = findLayers(comp, p.layerName);
            for (var i = layers.length - 1; i >= 0; i--) {
                layers[i].remove();
            }
        },
        "nx:layer-state-set": function (comp, p) {
            eachLayer(comp, p.layerName, function (layer) { layer.enabled = p.enabled; });
        },
        "nx:text-params-set": function (comp, p) {
            eachLayer(comp, p.layerName, function (layer) {
                editText(layer, function (doc) {
                    if (p.fontSize !== undefined) { doc.fontSize = p.fontSize; }
                    if (p.font !== undefined) { doc.font = p.font; }
                    if (p.fillColor !== undefined) { doc.applyFill = true; doc.fillColor = p.fillColor; }
                    if (p.tracking !== undefined) { doc.tracking = p.tracking; }
                    if (p.justification !== undefined) { doc.justification = justifications[p.justification]; }
                    if (p.lineHeight !== undefined) { doc.autoLeading = false; doc.leading = p.lineHeight; }
                    if (p.text !== undefined) { doc.text = p.text; }
                });
            });
        },
        "nx:solid-color-set": function (comp, p) {
            eachLayer(comp, p.layerName, function (layer) {
                if (!(layer.source && layer.source.mainSource instanceof SolidSource)) {
                    fail("layer \"" + layer.name + "\" is not a solid");
                }
                layer.source.mainSource.color = p.color;
            });
        },
        "nx:layer-start-set": function (comp, p) {
            eachLayer(comp, p.layerName, function (layer) { layer.startTime += p.start - layer.inPoint; });
        },
        "nx:layer-duration-set": function (comp, p) {
            eachLayer(comp, p.layerName, function (layer) { layer.outPoint = layer.inPoint + p.duration; });
        },
        "nx:comp-duration-set": function (comp, p) {
            var c = findComp(comp);
            c.duration = p.duration;
            c.workAreaStart = 0;
            c.workAreaDuration = p.duration;
        }
    };

    return {
        text: function (comp, layer, text) {
            eachLayer(comp, layer, function (l) { editText(l, function (doc) { doc.text = text; }); });
        },
        value: function (comp, layer, path, value) {
            eachLayer(comp, layer, function (l) { setValue(findProperty(l, path), value); });
        },
        expression: function (comp, layer, path, expression) {
            eachLayer(comp, layer, function (l) { findProperty(l, path).expression = expression; });
        },
        // footage replaces the source of the named layers only; other users of the old
        // footage keep it.
        footage: function (comp, layer, path) {
            var item = importFile(path);
            eachLayer(comp, layer, function (l) { l.replaceSource(item, false); });
        },
        // essential sets a composition's Essential Graphics properties. They are set on a layer
        // of the composition placed in a wrapper composition, which is then what gets rendered.
        essential: function (comp, wrapperName, values) {
            if (!wrappers[comp]) {
                var source = findComp(comp);
                var wrapper = app.project.items.addComp(wrapperName, source.width, source.height, source.pixelAspect,
                    source.duration, source.frameRate);
                wrappers[comp] = wrapper.layers.add(source);
            }
            var props = wrappers[comp].essentialProperty;
            for (var name in values) {
                if (values.hasOwnProperty(name)) {
                    var prop = props.property(name);
                    if (!prop) {
                        fail("composition \"" + comp + "\" has no essential property \"" + name + "\"");
                    }
                    prop.setValue(values[name]);
                }
            }
        },
        // script runs a user's script; it reads its params through NX.get(name).
        script: function (path, params) {
            var file = new File(path);
            if (!file.exists) {
                fail("the script \"" + path + "\" is missing");
            }
            NX = {
                params: params,
                get: function (name) { return params[name]; }
            };
            $.evalFile(file);
        },
        call: function (name, comp, params) {
            if (!functions[name]) {
                fail("no function \"" + name + "\"");
            }
            functions[name](comp, params);
        },
        save: function (path) {
            app.project.save(new File(path));
        }
    };
}());
