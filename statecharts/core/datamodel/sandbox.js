// Runs once in every fresh QuickJS context before any chart code: evaluated to a function
// and called with the codec's source (the part after the codec marker below).
// It removes what would make the fold nondeterministic (clock, randomness), and installs
// the helpers the Python side calls (namespace __sc), then records the baseline globals so
// snapshots hold only what the chart itself created.
(function (CODEC) {
  "use strict";
  const g = globalThis;
  const refuse = (what) => function () {
    throw new TypeError(what + " is not available inside a statechart (charts are deterministic)");
  };
  delete g.performance;
  const RealDate = g.Date;
  const SafeDate = new Proxy(RealDate, {
    construct(target, args, newTarget) {
      if (args.length === 0) refuse("new Date() without arguments")();
      return Reflect.construct(target, args, newTarget);
    },
    apply: refuse("Date()"),
  });
  RealDate.now = refuse("Date.now()");
  RealDate.prototype.constructor = SafeDate;
  g.Date = SafeDate;
  Math.random = refuse("Math.random()");


  // ---- tagged encoding: JSON plus the JS values JSON cannot hold ---------------------------
  const TAG = "$sc";
  const isPlain = (o) => { const p = Object.getPrototypeOf(o); return p === Object.prototype || p === null; };

  // The XML DOM and the tagged encoding (the codec) are compiled on first use: a session whose
  // values are all plain JSON never needs them, and compiling them was most of the cost of a
  // fresh context (that is, of every restore of a state that is not the live one). The codec's
  // top level only defines a class and functions and reads no global, so when it is compiled
  // cannot change what it does; the eval it is compiled with is the one the context began with.
  const pristineEval = g.eval;
  let codec = null;
  const loadCodec = () => codec || (codec = pristineEval(CODEC)(TAG, RealDate, isPlain));
  const encode = (value, path, seen) => loadCodec().encode(value, path, seen);
  const decode = (value, path, byPath, refs) => loadCodec().decode(value, path, byPath, refs);
  const link = (root, refs, byPath) => loadCodec().link(root, refs, byPath);

  // Whether parsed JSON holds no tagged value, so decoding it would only copy it. ("__proto__"
  // counts as tagged: decode would set a prototype with it, and must keep doing so.)
  function isUntagged(v) {
    if (v === null || typeof v !== "object") return true;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) if (!isUntagged(v[i])) return false;
      return true;
    }
    for (const k in v) if (k === TAG || k === "__proto__" || !isUntagged(v[k])) return false;
    return true;
  }

  // Whether a value is a plain JSON tree: no undefined, functions, NaN, cycles or sharing.
  function isPlainTree(v, seen) {
    switch (typeof v) {
      case "string": case "boolean": return true;
      case "number": return Number.isFinite(v);
      case "object":
        if (v === null) return true;
        if (seen.has(v)) return false;
        seen.add(v);
        if (Array.isArray(v)) {
          for (let i = 0; i < v.length; i++) if (!(i in v) || !isPlainTree(v[i], seen)) return false;
          return true;
        }
        if (!isPlain(v) || Object.prototype.hasOwnProperty.call(v, TAG)) return false;
        for (const k in v) if (!isPlainTree(v[k], seen)) return false;
        return true;
      default: return false;
    }
  }

  const SYSTEM = new Set(["_event", "_sessionid", "_name", "_ioprocessors", "__sc", "In"]);
  let currentEvent;
  let configurationText = "";
  let configuration = new Set();
  const loops = [];

  const sc = {
    get XmlNode() { return loadCodec().XmlNode; },
    baseline: null,
    xmlFromTree(tree) { return new (loadCodec().XmlNode)(tree, null); },
    encodeValue(v) { return JSON.stringify(encode(v, [], new Map())); },
    decodeValue(text) {
      const raw = JSON.parse(text);
      if (isUntagged(raw)) return raw;
      const byPath = new Map(); const refs = [];
      return link(decode(raw, [], byPath, refs), refs, byPath);
    },
    userKeys: [],
    quotedKeys: [],  // JSON.stringify(key) + ":" for each of userKeys
    snapshot(refreshKeys) {
      // Object.keys(globalThis) is slow in QuickJS; the Python side asks for a refresh only
      // after something that can create a global (a script, a sloppy expression, a declare).
      if (refreshKeys) {
        sc.userKeys = Object.keys(g).filter((k) => !SYSTEM.has(k) && !sc.baseline.has(k));
        sc.quotedKeys = sc.userKeys.map((k) => JSON.stringify(k) + ":");
      }
      const keys = sc.userKeys;
      const quoted = sc.quotedKeys;
      // Fast path: plain JSON trees (no undefined, functions, NaN, cycles or sharing), written
      // out piece by piece: the same text as JSON.stringify of the whole object (the key order
      // is the global object's, integer keys first either way), without building that object.
      // Primitives are written inline; the walk (and its Set) starts at an object.
      // (Joined, not concatenated: QuickJS concatenates long strings into ropes, which the
      // Python binding cannot read back.)
      const parts = ["{"];
      let seen = null;
      for (let i = 0; i < keys.length; i++) {
        const v = g[keys[i]];
        const t = typeof v;
        let piece;
        if (t === "number") {
          if (!Number.isFinite(v)) { parts.length = 0; break; }
          piece = "" + v;
        } else if (t === "string") {
          piece = JSON.stringify(v);
        } else if (t === "boolean") {
          piece = v ? "true" : "false";
        } else if (v === null) {
          piece = "null";
        } else if (t === "object") {
          if (seen === null) seen = new Set();
          if (!isPlainTree(v, seen)) { parts.length = 0; break; }
          piece = JSON.stringify(v);
        } else {
          parts.length = 0;
          break;
        }
        parts.push(i ? "," : "", quoted[i], piece);
      }
      if (parts.length) { parts.push("}"); return parts.join(""); }
      const out = {};
      const encoded = new Map();
      for (const key of keys) out[key] = encode(g[key], [key], encoded);
      return JSON.stringify(out);
    },
    restore(text) {
      const raw = JSON.parse(text);
      if (isUntagged(raw)) {
        for (const key of Object.keys(raw)) g[key] = raw[key];
        return;
      }
      const byPath = new Map(); const refs = [];
      const decoded = {};
      for (const key of Object.keys(raw)) decoded[key] = decode(raw[key], [key], byPath, refs);
      link(decoded, refs, byPath);
      for (const key of Object.keys(decoded)) g[key] = decoded[key];
    },
    declare(name, text) { g[name] = text == null ? undefined : sc.decodeValue(text); },
    setEvent(name, type, sendid, origin, origintype, invokeid, data) {
      const field = (v) => (v === null ? undefined : v);
      currentEvent = {
        name: name, type: type, sendid: field(sendid), origin: field(origin),
        origintype: field(origintype), invokeid: field(invokeid),
        data: data === null ? undefined : sc.decodeValue(data),
      };
    },
    // The configuration arrives as text with (nearly) every call after a transition; most
    // charts never call In(), so the Set is built on the first In() that reads it.
    setConfiguration(ids) { configurationText = ids; configuration = null; },
    isActive(id) {
      if (configuration === null) configuration = new Set(configurationText.split(" "));
      return configuration.has(String(id));
    },
    isIdentifier(name) {
      if (!/^[A-Za-z_$][\w$]*$/.test(name)) return false;
      try { (0, eval)("(function(){ var " + name + "; })"); return true; } catch (e) { return false; }
    },
    loopBegin(collection) {
      if (collection === null || typeof collection !== "object") {
        throw new TypeError("<foreach> array is not a collection: " + String(collection));
      }
      const items = Array.isArray(collection) ? collection.slice() : Object.values(collection);
      loops.push(items);
      return items.length;
    },
    loopItem(i) { return loops[loops.length - 1][i]; },
    loopEnd() { loops.pop(); },
    output(v) {
      // Values leaving the sandbox: JSON values pass as they are, the rest as tagged JSON text.
      return sc.encodeValue(v);
    },
  };

  Object.defineProperty(g, "_event", { get() { return currentEvent; }, enumerable: false, configurable: false });
  Object.defineProperty(g, "__sc", { value: sc, writable: false, enumerable: false, configurable: false });
})

// ==== codec: compiled on first use (loadCodec above) ====
(function (TAG, RealDate, isPlain) {
  "use strict";
  // ---- a minimal read-only XML DOM for XML values (spec B.2: XML content becomes a DOM) ----
  class XmlNode {
    constructor(tree, parent) {
      this.parentNode = parent || null;
      if (typeof tree === "string") {
        this.nodeType = 3; this.nodeName = "#text"; this.nodeValue = tree; this.childNodes = [];
        return;
      }
      this.nodeType = tree.document ? 9 : 1;
      this.nodeName = tree.document ? "#document" : tree.tag;
      this.tagName = tree.tag; this.localName = tree.local; this.namespaceURI = tree.ns || null;
      this.attributes = tree.attrs || {};
      this.childNodes = (tree.children || []).map((c) => new XmlNode(c, this));
      this.markup = tree.markup;
      if (!parent) Object.defineProperty(this, "tree", { value: tree, enumerable: false });
    }
    get firstChild() { return this.childNodes[0] || null; }
    get documentElement() { return this.childNodes.find((c) => c.nodeType === 1) || null; }
    get textContent() {
      return this.nodeType === 3 ? this.nodeValue : this.childNodes.map((c) => c.textContent).join("");
    }
    getAttribute(name) { return Object.prototype.hasOwnProperty.call(this.attributes, name) ? this.attributes[name] : null; }
    hasAttribute(name) { return Object.prototype.hasOwnProperty.call(this.attributes, name); }
    getElementsByTagName(name) {
      const found = [];
      const walk = (node) => {
        for (const c of node.childNodes) {
          if (c.nodeType === 1 && (name === "*" || c.tagName === name || c.localName === name)) found.push(c);
          walk(c);
        }
      };
      walk(this);
      return found;
    }
    toString() { return this.markup || this.textContent; }
  }


  function encode(value, path, seen) {
    switch (typeof value) {
      case "undefined": return { [TAG]: "undefined" };
      case "number":
        if (Number.isFinite(value)) return value;
        return { [TAG]: "number", v: String(value) };
      case "string": case "boolean": return value;
      case "bigint": return { [TAG]: "bigint", v: value.toString() };
      case "symbol": return { [TAG]: "undefined" };
      case "function": {
        const source = Function.prototype.toString.call(value);
        if (/\{\s*\[native code\]\s*\}$/.test(source)) return { [TAG]: "undefined" };
        return { [TAG]: "function", source: source };
      }
    }
    if (value === null) return null;
    if (seen.has(value)) return { [TAG]: "ref", path: seen.get(value) };
    seen.set(value, path);
    if (value instanceof XmlNode) {
      return { [TAG]: "xml", v: value.markup || value.textContent, tree: value.tree || null };
    }
    if (value instanceof RealDate) return { [TAG]: "date", v: value.getTime() };
    if (value instanceof RegExp) return { [TAG]: "regexp", source: value.source, flags: value.flags };
    if (Array.isArray(value)) {
      const out = new Array(value.length);
      for (let i = 0; i < value.length; i++) out[i] = encode(value[i], path.concat([i]), seen);
      return out;
    }
    if (value instanceof Map) {
      return { [TAG]: "map", v: Array.from(value.entries()).map(([k, v], i) =>
        [encode(k, path.concat(["#k" + i]), seen), encode(v, path.concat(["#v" + i]), seen)]) };
    }
    if (value instanceof Set) {
      return { [TAG]: "set", v: Array.from(value.values()).map((v, i) => encode(v, path.concat(["#v" + i]), seen)) };
    }
    const out = {};
    for (const key of Object.keys(value)) out[key] = encode(value[key], path.concat([key]), seen);
    if (Object.prototype.hasOwnProperty.call(value, TAG) || !isPlain(value) && false) {
      return { [TAG]: "object", v: out };
    }
    return out;
  }

  function decode(value, path, byPath, refs) {
    if (value === null || typeof value !== "object") return value;
    if (Array.isArray(value)) {
      const out = [];
      byPath.set(JSON.stringify(path), out);
      for (let i = 0; i < value.length; i++) out.push(decode(value[i], path.concat([i]), byPath, refs));
      return out;
    }
    const tag = value[TAG];
    if (tag !== undefined) {
      switch (tag) {
        case "undefined": return undefined;
        case "number": return Number(value.v);
        case "bigint": return BigInt(value.v);
        case "function": {
          try { return (0, eval)("(" + value.source + ")"); } catch (e) {
            // Method shorthand (`m() {...}`) is only valid inside an object literal.
            const holder = (0, eval)("({" + value.source + "})");
            return holder[Object.keys(holder)[0]];
          }
        }
        case "date": { const d = new RealDate(value.v); byPath.set(JSON.stringify(path), d); return d; }
        case "regexp": return new RegExp(value.source, value.flags);
        case "xml": return value.tree ? new XmlNode(value.tree, null) : String(value.v);
        case "ref": {
          const holder = { target: undefined };
          refs.push([holder, value.path]);
          return holder;
        }
        case "map": {
          const m = new Map();
          byPath.set(JSON.stringify(path), m);
          value.v.forEach(([k, v], i) => m.set(decode(k, path.concat(["#k" + i]), byPath, refs),
                                              decode(v, path.concat(["#v" + i]), byPath, refs)));
          return m;
        }
        case "set": {
          const s = new Set();
          byPath.set(JSON.stringify(path), s);
          value.v.forEach((v, i) => s.add(decode(v, path.concat(["#v" + i]), byPath, refs)));
          return s;
        }
        case "object": {
          const o = {};
          byPath.set(JSON.stringify(path), o);
          for (const key of Object.keys(value.v)) o[key] = decode(value.v[key], path.concat([key]), byPath, refs);
          return o;
        }
      }
    }
    const out = {};
    byPath.set(JSON.stringify(path), out);
    for (const key of Object.keys(value)) out[key] = decode(value[key], path.concat([key]), byPath, refs);
    return out;
  }

  // Replace reference placeholders (objects shared or cyclic at snapshot time).
  function link(root, refs, byPath) {
    if (!refs.length) return root;
    const holders = new Map(refs.map(([h, p]) => [h, byPath.get(JSON.stringify(p))]));
    const fix = (node, seen) => {
      if (node === null || typeof node !== "object" || seen.has(node)) return node;
      seen.add(node);
      if (holders.has(node)) return holders.get(node);
      if (node instanceof Map) {
        const entries = Array.from(node.entries());
        node.clear();
        for (const [k, v] of entries) node.set(fix(k, seen), fix(v, seen));
        return node;
      }
      if (node instanceof Set) {
        const members = Array.from(node.values());
        node.clear();
        for (const v of members) node.add(fix(v, seen));
        return node;
      }
      for (const key of Object.keys(node)) node[key] = fix(node[key], seen);
      return node;
    };
    return fix(root, new Set());
  }

  return { XmlNode, encode, decode, link };
})
