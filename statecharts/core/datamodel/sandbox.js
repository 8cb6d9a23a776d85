// Runs once in every fresh QuickJS context before any chart code.
// It removes what would make the fold nondeterministic (clock, randomness), and installs
// the helpers the Python side calls (namespace __sc), then records the baseline globals so
// snapshots hold only what the chart itself created.
(function (g) {
  "use strict";
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

  // ---- tagged encoding: JSON plus the JS values JSON cannot hold ---------------------------
  const TAG = "$sc";
  const isPlain = (o) => { const p = Object.getPrototypeOf(o); return p === Object.prototype || p === null; };

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
  let configuration = new Set();
  const loops = [];

  const sc = {
    XmlNode,
    baseline: null,
    xmlFromTree(tree) { return new XmlNode(tree, null); },
    encodeValue(v) { return JSON.stringify(encode(v, [], new Map())); },
    decodeValue(text) {
      const byPath = new Map(); const refs = [];
      return link(decode(JSON.parse(text), [], byPath, refs), refs, byPath);
    },
    userKeys: [],
    snapshot(refreshKeys) {
      // Object.keys(globalThis) is slow in QuickJS; the Python side asks for a refresh only
      // after something that can create a global (a script, a sloppy expression, a declare).
      if (refreshKeys) sc.userKeys = Object.keys(g).filter((k) => !SYSTEM.has(k) && !sc.baseline.has(k));
      const keys = sc.userKeys;
      // Fast path: plain JSON trees (no undefined, functions, NaN, cycles or sharing), copied
      // while checked. Primitives are checked inline; the walk (and its Set) starts at an object.
      let out = {};
      let seen = null;
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i];
        const v = g[key];
        const t = typeof v;
        if (t === "string" || t === "boolean" || v === null ||
            (t === "number" && Number.isFinite(v))) {
          out[key] = v;
          continue;
        }
        if (t === "object") {
          if (seen === null) seen = new Set();
          if (isPlainTree(v, seen)) { out[key] = v; continue; }
        }
        out = null;
        break;
      }
      if (out === null) {
        out = {};
        const encoded = new Map();
        for (const key of keys) out[key] = encode(g[key], [key], encoded);
      }
      return JSON.stringify(out);
    },
    restore(text) {
      const byPath = new Map(); const refs = [];
      const raw = JSON.parse(text);
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
    setConfiguration(ids) { configuration = new Set(ids.split(" ")); },
    isActive(id) { return configuration.has(String(id)); },
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
})(globalThis);
