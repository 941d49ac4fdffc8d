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

    // scopeComps lists the compositions where an asset finds its layer, by nexrender's
    // conventions. scope.rendered is the job's composition, scope.composition the asset's: none
    // is the rendered one and every composition nested in it; "*" is every composition;
    // "A->B->C" is C as used in B as used in A; any other name is that composition.
    function scopeComps(scope) {
        var where = scope.composition, out = [], i, j;
        if (where === "*") {
            for (i = 1; i <= app.project.numItems; i++) {
                if (app.project.item(i) instanceof CompItem) {
                    out.push(app.project.item(i));
                }
            }
            return out;
        }
        if (!where) {
            var seen = {};
            out.push(findComp(scope.rendered));
            seen[out[0].id] = true;
            for (i = 0; i < out.length; i++) {
                for (j = 1; j <= out[i].numLayers; j++) {
                    var source = out[i].layer(j).source;
                    if (source instanceof CompItem && !seen[source.id]) {
                        seen[source.id] = true;
                        out.push(source);
                    }
                }
            }
            return out;
        }
        var parts = where.split("->");
        var at = findComp(parts[0]);
        for (i = 1; i < parts.length; i++) {
            var next = null;
            for (j = 1; j <= at.numLayers && !next; j++) {
                var layer = at.layer(j);
                if (layer.source instanceof CompItem && (layer.name === parts[i] || layer.source.name === parts[i])) {
                    next = layer.source;
                }
            }
            if (!next) {
                fail("composition \"" + at.name + "\" has no precomp layer or nested composition named \"" + parts[i] + "\" (in \"" + where + "\")");
            }
            at = next;
        }
        return [at];
    }

    // findLayers returns every layer of that name in the asset's scope.
    function findLayers(scope, layerName) {
        var comps = scopeComps(scope), found = [], names = [];
        for (var c = 0; c < comps.length; c++) {
            names.push("\"" + comps[c].name + "\"");
            for (var i = 1; i <= comps[c].numLayers; i++) {
                if (comps[c].layer(i).name === layerName) {
                    found.push(comps[c].layer(i));
                }
            }
        }
        if (found.length === 0) {
            fail("no layer named \"" + layerName + "\" in the compositions searched: " + names.join(", "));
        }
        return found;
    }

    function eachLayer(scope, layerName, apply) {
        var layers = findLayers(scope, layerName);
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
        "nx:layer-remove": function (scope, p) {
            var layers = findLayers(scope, p.layerName);
            for (var i = layers.length - 1; i >= 0; i--) {
                layers[i].remove();
            }
        },
        "nx:layer-state-set": function (scope, p) {
            eachLayer(scope, p.layerName, function (layer) { layer.enabled = p.enabled; });
        },
        "nx:text-params-set": function (scope, p) {
            eachLayer(scope, p.layerName, function (layer) {
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
        "nx:solid-color-set": function (scope, p) {
            eachLayer(scope, p.layerName, function (layer) {
                if (!(layer.source && layer.source.mainSource instanceof SolidSource)) {
                    fail("layer \"" + layer.name + "\" is not a solid");
                }
                layer.source.mainSource.color = p.color;
            });
        },
        "nx:layer-start-set": function (scope, p) {
            eachLayer(scope, p.layerName, function (layer) { layer.startTime += p.start - layer.inPoint; });
        },
        "nx:layer-duration-set": function (scope, p) {
            eachLayer(scope, p.layerName, function (layer) { layer.outPoint = layer.inPoint + p.duration; });
        },
        "nx:comp-duration-set": function (scope, p) {
            var c = scope.composition ? scopeComps(scope)[0] : findComp(scope.rendered);
            c.duration = p.duration;
            c.workAreaStart = 0;
            c.workAreaDuration = p.duration;
        }
    };

    return {
        text: function (scope, layer, text) {
            eachLayer(scope, layer, function (l) { editText(l, function (doc) { doc.text = text; }); });
        },
        value: function (scope, layer, path, value) {
            eachLayer(scope, layer, function (l) { setValue(findProperty(l, path), value); });
        },
        expression: function (scope, layer, path, expression) {
            eachLayer(scope, layer, function (l) { findProperty(l, path).expression = expression; });
        },
        // footage replaces the source of the named layers only; other users of the old
        // footage keep it.
        footage: function (scope, layer, path) {
            var item = importFile(path);
            eachLayer(scope, layer, function (l) { l.replaceSource(item, false); });
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
        call: function (name, scope, params) {
            if (!functions[name]) {
                fail("no function \"" + name + "\"");
            }
            functions[name](scope, params);
        },
        save: function (path) {
            app.project.save(new File(path));
        }
    };
}());
