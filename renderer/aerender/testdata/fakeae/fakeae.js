// A small stand-in for After Effects' scripting object model, enough to run framefarm's runtime
// under Node.js in tests: compositions, their layers, precomp sources and text documents.
// PROJECT (set before this file runs) describes it: [{id, name, layers: [{name, source, text}]}].
function CompItem(spec) {
    this.id = spec.id;
    this.name = spec.name;
    this.layers = [];
}
CompItem.prototype.layer = function (i) { return this.layers[i - 1]; };
Object.defineProperty(CompItem.prototype, "numLayers", { get: function () { return this.layers.length; } });

function TextProperty(text) {
    this.numKeys = 0;
    this.value = { text: text };
    this.expression = "";
}
TextProperty.prototype.setValue = function (v) { this.value = v; };

function Layer(spec, comp) {
    this.name = spec.name;
    this.comp = comp;
    this.source = null;
    this.props = {};
    if (spec.text !== undefined) {
        this.props["Source Text"] = new TextProperty(spec.text);
    }
}
Layer.prototype.property = function (name) { return this.props[name] || null; };
Layer.prototype.remove = function () { this.comp.layers.splice(this.comp.layers.indexOf(this), 1); };

var items = PROJECT.map(function (spec) { return new CompItem(spec); });
PROJECT.forEach(function (spec, i) {
    spec.layers.forEach(function (l) {
        var layer = new Layer(l, items[i]);
        layer.source = items.filter(function (c) { return c.id === l.source; })[0] || null;
        items[i].layers.push(layer);
    });
});
var app = { project: { numItems: items.length, item: function (i) { return items[i - 1]; } } };
var ParagraphJustification = {};
function File() {}
function ImportOptions() {}
function SolidSource() {}

// report prints every text layer's text by composition, or the error the calls threw.
function report(run) {
    try {
        run();
    } catch (e) {
        console.log(JSON.stringify({ error: e.message }));
        return;
    }
    var out = {};
    items.forEach(function (c) {
        out[c.name] = {};
        c.layers.forEach(function (l) {
            if (l.props["Source Text"]) {
                out[c.name][l.name] = l.props["Source Text"].value.text;
            }
        });
    });
    console.log(JSON.stringify(out));
}
