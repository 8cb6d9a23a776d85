// The ECMAScript datamodel's machinery, run once in every fresh QuickJS context before any
// chart code. Evaluated to a function, called with the codec's source (the part after the
// codec marker below) and the nesting bound; it returns `pick`, through which the Python side
// fetches the engine's functions. Nothing of the machinery is put on the global object:
// chart code cannot reach it, replace it or call it.
//
// In order, it:
// 1. captures every built-in the machinery uses;
// 2. removes what would make a step depend on anything but its input (clock, randomness,
//    garbage collection, job queues);
// 3. locks the realm down: every built-in prototype, constructor and namespace is frozen and
//    every built-in global is read-only, so chart code cannot change what the next step (or
//    a restored session) sees; the global object only takes plain variables;
// 4. defines the engine: wrappers that run chart code and turn whatever it throws into a
//    plain message (never a value whose conversion would run chart code), the snapshot that
//    writes only what restore reads back, and restore.
(function (CODEC, MAX_DEPTH, REFUSALS) {
  "use strict";
  const g = globalThis;

  // ---- 1. what the machinery uses, captured before anything else -----------------------
  const O = Object, R = Reflect;
  const freeze = O.freeze, isExtensible = O.isExtensible, getProto = O.getPrototypeOf;
  const gopd = O.getOwnPropertyDescriptor, defineProperty = O.defineProperty;
  const objectKeys = O.keys, objectValues = O.values, getOwnSymbols = O.getOwnPropertySymbols;
  const ownKeys = R.ownKeys, apply = R.apply;
  const isArray = Array.isArray, stringify = JSON.stringify, parse = JSON.parse;
  const ObjectProto = O.prototype, ArrayProto = Array.prototype;
  const arraySlice = ArrayProto.slice, hasOwnProperty = ObjectProto.hasOwnProperty;
  const fnToString = Function.prototype.toString;
  const RealDate = g.Date, DateProto = RealDate.prototype, dateGetTime = DateProto.getTime;
  const RealRegExp = g.RegExp, RegExpProto = RealRegExp.prototype;
  const regexpSource = gopd(RegExpProto, "source").get;
  const regexpFlags = gopd(RegExpProto, "flags").get;
  const RealMap = g.Map, MapProto = RealMap.prototype, mapForEach = MapProto.forEach;
  const RealSet = g.Set, SetProto = RealSet.prototype, setForEach = SetProto.forEach;
  const RealWeakSet = g.WeakSet, RealWeakMap = g.WeakMap, RealProxy = g.Proxy;
  const RealString = g.String, RealNumber = g.Number, RealBigInt = g.BigInt;
  const bigintToString = RealBigInt.prototype.toString;
  const RealTypeError = g.TypeError, RealRangeError = g.RangeError;
  const indirectEval = g.eval;
  const TAG = "$sc";
  const hasOwn = (o, k) => apply(hasOwnProperty, o, [k]);
  // What the realm refuses, removes or fixes: one declared table (refusals.py, as JSON).
  const T = parse(REFUSALS);

  // ---- 2. determinism -------------------------------------------------------------------
  // Every function the machinery puts where chart code can reach it is frozen with the
  // built-ins (a `prototype` object included, had it one).
  const installed = [];
  const expose = (f) => { installed.push(f); return f; };
  const refuse = (what) => expose({ refused() {
    throw new RealTypeError(what + " is not available inside a statechart (charts are deterministic)");
  } }.refused);
  const SafeDate = new RealProxy(RealDate, {
    construct(target, args, newTarget) {
      if (args.length === 0) refuse(T.date_constructed_without_arguments)();
      return R.construct(target, args, newTarget);
    },
    apply: refuse(T.date_called),
  });
  for (const [holder, member, what] of T.refused_calls) g[holder][member] = refuse(what);
  DateProto.constructor = SafeDate;
  g.Date = SafeDate;
  for (const name of T.removed_globals) delete g[name];
  for (const [holderName, name] of T.fixed_members) {
    const holder = g[holderName];
    const d = gopd(holder, name);
    if (d !== undefined && d.configurable) {
      defineProperty(holder, name, { value: d.get ? apply(d.get, holder, []) : d.value,
                                     writable: false, enumerable: false, configurable: false });
    }
  }

  // ---- 3. lockdown --------------------------------------------------------------------------
  // The global object itself cannot be frozen (the datamodel lives on it), so it only accepts
  // what a snapshot can hold and a restore recreates: plain, deletable variables.
  const refuseOnGlobal = (what) => {
    throw new RealTypeError(what + " is not allowed on the global object (only plain variables are)");
  };
  const plainDescriptor = (d) => d !== null && typeof d === "object" &&
    !("get" in d) && !("set" in d) &&
    (!("writable" in d) || d.writable === true) && (!("enumerable" in d) || d.enumerable === true) &&
    (!("configurable" in d) || d.configurable === true);
  const checkGlobalDefine = (key, d) => {
    const existing = gopd(g, key);
    const complete = existing !== undefined ||
      ("writable" in d && "enumerable" in d && "configurable" in d);
    if (!plainDescriptor(d) || !complete) refuseOnGlobal("a property that is not a plain variable");
  };
  const realDefineProperty = defineProperty, realDefineProperties = O.defineProperties;
  O.defineProperty = expose({ defineProperty(o, key, d) {
    if (o === g) checkGlobalDefine(key, d);
    return realDefineProperty(o, key, d);
  } }.defineProperty);
  O.defineProperties = expose({ defineProperties(o, ds) {
    if (o === g) { const all = O.getOwnPropertyDescriptors(ds); for (const k of ownKeys(all)) checkGlobalDefine(k, ds[k]); }
    return realDefineProperties(o, ds);
  } }.defineProperties);
  const realReflectDefine = R.defineProperty;
  R.defineProperty = expose({ defineProperty(o, key, d) {
    if (o === g) { try { checkGlobalDefine(key, d); } catch (e) { return false; } }
    return realReflectDefine(o, key, d);
  } }.defineProperty);
  for (const [holderName, name] of T.refused_on_the_global_object) {
    const holder = g[holderName];
    const real = holder[name];
    const reflect = holder === R;
    holder[name] = expose({ [name](o, ...rest) {
      if (o === g) { if (reflect) return false; refuseOnGlobal(name); }
      return apply(real, holder, [o, ...rest]);
    } }[name]);
  }
  for (const name of T.accessors_refused_on_the_global_object) {
    const real = ObjectProto[name];
    ObjectProto[name] = expose({ [name](...args) {
      if (this === g) refuseOnGlobal("an accessor");
      return apply(real, this, args);
    } }[name]);
  }
  const protoAccessor = gopd(ObjectProto, "__proto__");
  if (protoAccessor !== undefined && protoAccessor.configurable) {
    const protoSet = protoAccessor.set;
    const setProto = expose({ set(p) {
      if (this === g) refuseOnGlobal("changing the prototype");
      apply(protoSet, this, [p]);
    } }.set);
    defineProperty(ObjectProto, "__proto__", { get: protoAccessor.get, set: setProto,
                                               enumerable: false, configurable: false });
  }

  // Frozen prototypes would turn `obj.toString = f`, `err.name = "MyError"` or copying a
  // key named "constructor" into a silent no-op (an assignment cannot shadow a read-only
  // inherited property). As hardened JavaScript does, the properties of the prototypes
  // ordinary objects and errors inherit from become accessors: reading gives the built-in
  // value, assigning defines the property on the object assigned to.
  const overrideGetters = new RealWeakSet();
  const allowOverride = (proto, key) => {
    const d = gopd(proto, key);
    if (d === undefined || !("value" in d) || !d.configurable) return;
    const value = d.value;
    const get = expose({ get() { return value; } }.get);
    const set = expose({ set(v) {
      if (this === proto) throw new RealTypeError("Cannot assign to read only property '" + RealString(key) + "' of a built-in prototype");
      realDefineProperty(this, key, { value: v, writable: true, enumerable: true, configurable: true });
    } }.set);
    overrideGetters.add(get);
    realDefineProperty(proto, key, { get: get, set: set, enumerable: d.enumerable, configurable: false });
  };
  for (const key of ownKeys(ObjectProto)) if (key !== "__proto__") allowOverride(ObjectProto, key);
  for (const E of [g.Error, g.EvalError, g.RangeError, g.ReferenceError, g.SyntaxError, g.TypeError,
                   g.URIError, g.AggregateError, g.InternalError, g.SuppressedError]) {
    if (E === undefined) continue;
    for (const key of ["constructor", "name", "message", "toString"]) allowOverride(E.prototype, key);
  }
  for (const key of ["constructor", "toString", "toLocaleString"]) {
    allowOverride(ArrayProto, key);
    allowOverride(Function.prototype, key);
  }

  // The system variables: read-only for chart code, the same objects for every session an
  // engine serves (install sets what they give).
  let sessionId = "", sessionName = null, ioprocessors = null, platform = null, currentEvent;
  // _x when the host gives no chart facts (the in-memory driver, a chart whose code never
  // names _x: the stepper then reads no row for it).
  const NO_PLATFORM = '{"chart":{"version":null,"migratedFrom":null,"migratedAt":null}}';
  let noPlatform = null;
  // True from a reset to the next install: the engine then holds nothing of any session (no
  // code runs in an engine between its release, which resets it, and the next install), so
  // install need not reset it again. A new engine starts false: install resets it.
  let resetSinceInstall = false;
  let configurationText = "", configuration = null;
  const isActive = (id) => {
    if (configuration === null) configuration = new RealSet(configurationText.split(" "));
    return configuration.has(RealString(id));
  };
  for (const [key, get] of [["_sessionid", () => sessionId], ["_name", () => sessionName],
                            ["_ioprocessors", () => ioprocessors], ["_event", () => currentEvent],
                            ["_x", () => platform]]) {
    realDefineProperty(g, key, { get: expose({ [key]() { return get(); } }[key]),
                                 enumerable: false, configurable: false });
  }
  realDefineProperty(g, "In", { value: expose({ In(id) { return isActive(id); } }.In),
                                writable: false, enumerable: false, configurable: false });

  // Everything a chart can reach from the global object through properties, accessors and
  // prototypes, and the built-ins only reachable through an instance (iterators,
  // generators, async functions): frozen, every function included. Nothing chart code does
  // to the realm survives into the next step, differs from a restored engine, or reaches
  // the next session the engine serves. (About a millisecond, once per engine.)
  {
    const seen = new RealSet();
    const stack = [];
    const hold = (o) => {
      if (o !== null && (typeof o === "object" || typeof o === "function") && o !== g && !seen.has(o)) {
        seen.add(o); stack.push(o);
      }
    };
    const globalNames = ownKeys(g);
    for (let i = 0; i < globalNames.length; i++) {
      const d = gopd(g, globalNames[i]);
      hold(d.value); hold(d.get); hold(d.set);
    }
    const instances = [
      [][Symbol.iterator](), new RealMap()[Symbol.iterator](), new RealSet()[Symbol.iterator](),
      ""[Symbol.iterator](), /a/[Symbol.matchAll](""), function* () {}, async function () {},
      async function* () {}, (function* () {})(), (async function* () {})(),
      [].values().map((x) => x), g.Iterator && g.Iterator.from({ next() { return { done: true }; } }),
    ];
    for (let i = 0; i < instances.length; i++) hold(getProto(instances[i]));
    for (let i = 0; i < installed.length; i++) hold(installed[i]);
    while (stack.length) {
      const o = stack.pop();
      freeze(o);
      hold(getProto(o));
      const keys = ownKeys(o);
      // (A built-in method holds nothing but its length and name: no need to look.)
      if (typeof o === "function" && keys.length === 2 && keys[0] === "length" && keys[1] === "name") continue;
      for (let i = 0; i < keys.length; i++) {
        const d = gopd(o, keys[i]);
        if ("value" in d) hold(d.value); else { hold(d.get); hold(d.set); }
      }
    }
    // Built-in globals become read-only: `JSON = ...` cannot replace what the next step sees.
    for (let i = 0; i < globalNames.length; i++) {
      const d = gopd(g, globalNames[i]);
      if (d.configurable || d.writable) {
        realDefineProperty(g, globalNames[i], "value" in d ? { writable: false, configurable: false }
                                                             : { configurable: false });
      }
    }
  }

  // ---- 4. the engine ------------------------------------------------------------------------

  // What chart code threw, as text, without running chart code: an exception whose
  // conversion to text runs chart code (a toString that never returns) must not reach the
  // Python binding, which would convert it with no time limit.
  const dataProperty = (o, key) => {
    for (let depth = 0; o !== null && depth < 32; depth++, o = getProto(o)) {
      const d = gopd(o, key);
      if (d !== undefined) {
        if ("value" in d) return d.value;
        return overrideGetters.has(d.get) ? apply(d.get, o, []) : undefined;
      }
    }
    return undefined;
  };
  const printable = (text) => apply(RealString.prototype.toWellFormed, text, []).replace(/\0/g, "\\0");
  const describe = (e) => {
    if (e === null || (typeof e !== "object" && typeof e !== "function")) {
      return typeof e === "symbol" ? "a symbol was thrown" : RealString(e);
    }
    const name = dataProperty(e, "name"), message = dataProperty(e, "message");
    if (typeof message !== "string") return "a value that is not an Error was thrown";
    return typeof name === "string" && name !== "" ? [name, ": ", message].join("") : message;
  };
  // Thrown to Python: a primitive string (its first line is what error.execution says).
  const safe = (e) => [printable(describe(e))].join("");

  // Global names that are not the datamodel's: the realm's and the system variables.
  const baseline = new RealSet(ownKeys(g));
  const baselineSymbols = getOwnSymbols(g).length;
  const loops = [];
  let codec = null;
  const loadCodec = () => codec || (codec = indirectEval(CODEC)(TAG, MAX_DEPTH, {
    RealDate, DateProto, dateGetTime, RealRegExp, RegExpProto, regexpSource, regexpFlags,
    RealMap, MapProto, mapForEach, RealSet, SetProto, setForEach, RealWeakSet, RealWeakMap,
    ObjectProto, ArrayProto, arraySlice, fnToString, bigintToString, indirectEval,
    RealString, RealNumber, RealBigInt, RealTypeError, RealRangeError,
    freeze, isExtensible, getProto, gopd, defineProperty, ownKeys, apply, isArray, hasOwn,
  }));

  // Whether parsed JSON holds no tagged value (decoding would only copy it), and nests no
  // deeper than the bound.
  function isUntagged(v, depth) {
    if (v === null || typeof v !== "object") return true;
    if (depth > MAX_DEPTH) return false;
    if (isArray(v)) {
      for (let i = 0; i < v.length; i++) if (!isUntagged(v[i], depth + 1)) return false;
      return true;
    }
    for (const k in v) if (k === TAG || !isUntagged(v[k], depth + 1)) return false;
    return true;
  }

  // Whether `v` is a JSON tree that restores exactly as itself: finite numbers (not -0),
  // strings, booleans, null, and plain extensible objects and arrays whose properties are
  // all plain data properties (no getters, holes, symbols, frozen or hidden properties), not
  // shared, no deeper than the bound. Reads descriptors: never runs chart code.
  function isExactTree(v, seen, depth) {
    switch (typeof v) {
      case "string": case "boolean": return true;
      case "number": return v - v === 0 && (v !== 0 || 1 / v > 0);
      case "object": {
        if (v === null) return true;
        if (depth > MAX_DEPTH || seen.has(v) || !isExtensible(v)) return false;
        seen.add(v);
        const proto = getProto(v);
        const keys = ownKeys(v);
        let n = keys.length;
        if (proto === ArrayProto) {
          if (!isArray(v) || n !== v.length + 1) return false;
          n -= 1;  // "length", last of the keys
        } else if (proto !== ObjectProto) {
          return false;
        }
        for (let i = 0; i < n; i++) {
          const key = keys[i];
          if (typeof key !== "string" || key === TAG) return false;
          const d = gopd(v, key);
          if (!d.writable || !d.enumerable || !d.configurable || !("value" in d)) return false;
          if (!isExactTree(d.value, seen, depth + 1)) return false;
        }
        return true;
      }
      default: return false;
    }
  }

  // JSON.stringify writes a lone surrogate as an escape (a well-formed pair stays as it is):
  // strings leave the engine as Unicode text, with U+FFFD in place of each (the character
  // itself, as JSON.stringify writes it, so the text stays the one the value gives).
  const LONE_SURROGATE = /\\\\|\\u[dD][89a-fA-F][0-9a-fA-F]{2}/g;
  const wellFormedJson = (text) => text.indexOf("\\u") < 0 && text.indexOf("\\U") < 0 ? text
    : text.replace(LONE_SURROGATE, (m) => (m === "\\\\" ? m : "\ufffd"));
  // A value leaving the engine (a log, event data, donedata) as tagged JSON text.
  const encodeValue = (v) => {
    const state = { exact: true, hooks: false, functions: [] };
    return wellFormedJson(stringify(loadCodec().encode(v, [], new RealMap(), state, 1)));
  };
  const decodeValue = (text) => {
    const raw = parse(text);
    if (isUntagged(raw, 1)) return raw;
    const c = loadCodec();
    const byPath = new RealMap(); const refs = [];
    return c.link(c.decode(raw, [], byPath, refs, 1, null), refs, byPath);
  };

  let userKeys = [];
  let quotedKeys = [];  // JSON.stringify(key) + ":" for each of userKeys
  let hooks = false;  // the datamodel holds a function under valueOf/toString/toJSON

  // Make the datamodel exactly what `text` restores: every global not in it is deleted, the
  // rest set to the decoded values. What a restore does in a fresh engine, and what the
  // snapshot does to the live one when something would not come back as it is.
  function rebuild(text, fresh) {
    const raw = parse(text);
    if (raw === null || typeof raw !== "object" || isArray(raw)) {
      throw new RealTypeError("a datamodel snapshot must be a JSON object");
    }
    const names = objectKeys(raw);
    for (let i = 0; i < names.length; i++) {
      if (baseline.has(names[i])) throw new RealTypeError(names[i] + " is not a datamodel variable");
    }
    let values = raw;
    hooks = false;
    if (!isUntagged(raw, 0)) {
      const c = loadCodec();
      const byPath = new RealMap(); const refs = []; const found = { hooks: false };
      values = {};
      for (let i = 0; i < names.length; i++) {
        defineProperty(values, names[i], { value: c.decode(raw[names[i]], [names[i]], byPath, refs, 1, fresh, found),
                                           writable: true, enumerable: true, configurable: true });
      }
      c.link(values, refs, byPath);
      hooks = found.hooks;
    }
    const present = ownKeys(g);
    for (let i = 0; i < present.length; i++) {
      const key = present[i];
      if (!baseline.has(key) && !(typeof key === "string" && hasOwn(values, key))) delete g[key];
    }
    for (let i = 0; i < names.length; i++) g[names[i]] = values[names[i]];
  }

  function snapshot(refreshKeys) {
    // Object.keys(globalThis) is slow in QuickJS; the Python side asks for a refresh only
    // after something that can create or delete a global.
    if (refreshKeys) {
      const all = objectKeys(g);
      userKeys = []; quotedKeys = [];
      for (let i = 0; i < all.length; i++) {
        if (!baseline.has(all[i])) { userKeys.push(all[i]); quotedKeys.push(stringify(all[i]) + ":"); }
      }
    }
    // Symbol-keyed globals are no datamodel variable: a restore would not have them.
    let exact = getOwnSymbols(g).length === baselineSymbols;
    const keys = userKeys, quoted = quotedKeys;
    // Fast path: exact JSON trees, written piece by piece (the same text as JSON.stringify
    // of the whole object, without building it). Joined, not concatenated: QuickJS makes
    // long concatenations into ropes, which the Python binding cannot read.
    const parts = ["{"];
    let seen = null;
    for (let i = 0; i < keys.length; i++) {
      const v = g[keys[i]];
      const t = typeof v;
      let piece;
      if (t === "number") {
        if (v - v !== 0 || (v === 0 && 1 / v < 0)) { parts.length = 0; break; }
        piece = "" + v;
      } else if (t === "string") {
        piece = stringify(v);
      } else if (t === "boolean") {
        piece = v ? "true" : "false";
      } else if (v === null) {
        piece = "null";
      } else if (t === "object") {
        if (seen === null) seen = new RealSet();
        if (!isExactTree(v, seen, 1)) { parts.length = 0; break; }
        piece = stringify(v);
      } else {
        parts.length = 0;
        break;
      }
      parts.push(i ? "," : "", quoted[i], piece);
    }
    let text;
    let fresh = null;
    if (parts.length) {
      parts.push("}");
      text = parts.join("");
      hooks = false;
    } else {
      const state = { exact: true, hooks: false, functions: [] };
      const out = {};
      const encoded = new RealMap();
      const c = loadCodec();
      for (let i = 0; i < keys.length; i++) {
        realDefineProperty(out, keys[i], { value: c.encode(g[keys[i]], [keys[i]], encoded, state, 1),
                                           writable: true, enumerable: true, configurable: true });
      }
      text = stringify(out);
      exact = exact && state.exact;
      hooks = state.hooks;
      fresh = state.functions;
    }
    const checked = wellFormedJson(text);
    if (checked !== text) { text = checked; exact = false; }
    if (!exact) rebuild(text, fresh);
    return [hooks ? "h" : "-", text].join("");  // (joined: a concatenation would be a rope)
  }

  const setConfiguration = (ids) => { configurationText = ids; configuration = null; };

  // Wrappers around compiled chart functions: the configuration for In() rides along as the
  // first argument (null when unchanged), and whatever the chart throws leaves as text.
  // A value returns as itself when it is a primitive the binding reads exactly; otherwise
  // as [tagged JSON text].
  const isPlainString = (r) => r.indexOf("\0") < 0 && apply(RealString.prototype.isWellFormed, r, []);
  const wrapValue = (f) => function (cfg) {
    if (cfg !== null) setConfiguration(cfg);
    let r;
    try { r = f(); } catch (e) { throw safe(e); }
    try {
      if (typeof r === "string") {
        // A long string made by concatenation is a rope, which the binding cannot read:
        // joining flattens it.
        if (isPlainString(r)) return r.length < 256 ? r : [r].join("");
        return [encodeValue(r)];
      }
      if (r === null || typeof r === "boolean" || (typeof r === "number" && r - r === 0)) return r;
      return [encodeValue(r)];
    } catch (e) { throw safe(e); }
  };
  const wrapCond = (f) => function (cfg) {
    if (cfg !== null) setConfiguration(cfg);
    try { return !!f(); } catch (e) { throw safe(e); }
  };
  // The assigned value comes back when it is a primitive the Python mirror can hold.
  const wrapAssign = (f) => function (cfg) {
    if (cfg !== null) setConfiguration(cfg);
    let v;
    try { v = f(); } catch (e) { throw safe(e); }
    const t = typeof v;
    return (t === "number" && v - v === 0 && (v !== 0 || 1 / v > 0)) || t === "boolean" ||
      (t === "string" && v.length < 256 && isPlainString(v)) ? v : undefined;
  };
  const wrapAssignValue = (f) => function (cfg, text) {
    if (cfg !== null) setConfiguration(cfg);
    try { f(decodeValue(text)); } catch (e) { throw safe(e); }
  };

  const engine = {
    // A session begins: its system variables, and nothing left by the last one.
    install(id, name, io, x) {
      if (!resetSinceInstall) engine.reset();
      resetSinceInstall = false;
      sessionId = id;
      sessionName = name;
      ioprocessors = loadDeepFrozen(parse(io));
      // (null: the host gave no chart facts; the all-null object is built once per engine)
      platform = x === null ? (noPlatform || (noPlatform = loadDeepFrozen(parse(NO_PLATFORM))))
        : loadDeepFrozen(parse(x));
    },
    // What a session leaves in the engine is removed: its variables (every global that is
    // not the realm's), its event, configuration and loops. The realm itself is frozen.
    reset() {
      const present = ownKeys(g);
      for (let i = 0; i < present.length; i++) if (!baseline.has(present[i])) delete g[present[i]];
      currentEvent = undefined; configurationText = ""; configuration = null;
      loops.length = 0; userKeys = []; quotedKeys = []; hooks = false;
      sessionId = ""; sessionName = null; ioprocessors = null; platform = null;
      resetSinceInstall = true;
    },
    wrapValue, wrapCond, wrapAssign, wrapAssignValue,
    // Compiles a text the Python side has checked is one function expression, so compiling
    // it runs nothing.
    compile(text) {
      let f;
      try { f = indirectEval(text); } catch (e) { throw safe(e); }
      if (typeof f !== "function") throw "not a function";
      // Shared by every session the engine serves: nothing can be kept on it.
      const prototype = gopd(f, "prototype");
      if (prototype !== undefined) freeze(prototype.value);
      return freeze(f);
    },
    declare(name, text) {
      try { g[name] = text === null ? undefined : decodeValue(text); } catch (e) { throw safe(e); }
    },
    declareFrom(name, f) {
      try { g[name] = f(); } catch (e) { throw safe(e); }
    },
    // Values the Python side worked out without running chart code (scalar.py: integers and
    // booleans, for variables the datamodel already holds), written before the next call
    // that could read them.
    setGlobals(text) {
      try {
        const values = parse(text), names = objectKeys(values);
        for (let i = 0; i < names.length; i++) g[names[i]] = values[names[i]];
      } catch (e) { throw safe(e); }
    },
    runScript(source) {
      // Indirect eval: global code whose var and function declarations become deletable
      // global variables (as a restore creates them) and whose let, const and class
      // declarations stay inside the script.
      try { indirectEval(source); } catch (e) { throw safe(e); }
    },
    setEvent(name, type, sendid, origin, origintype, invokeid, data, raw) {
      const field = (v) => (v === null ? undefined : v);
      try {
        // Read-only (spec 5.10): its fields cannot be changed, its data is the chart's.
        currentEvent = freeze({
          name: name, type: type, sendid: field(sendid), origin: field(origin),
          origintype: field(origintype), invokeid: field(invokeid),
          data: data === null ? undefined : decodeValue(data),
          // The message as an I/O processor received it (Basic HTTP, spec C.2): present only
          // on such events, so every other _event keeps the fields of spec 5.10.1.
          ...(raw === null || raw === undefined ? {} : { raw: raw }),
        });
      } catch (e) { currentEvent = undefined; throw safe(e); }
    },
    clearEvent() { currentEvent = undefined; },
    setConfiguration,
    isIdentifier(name) {
      if (!/^[A-Za-z_$][\w$]*$/.test(name)) return false;
      try { indirectEval("(function(){ var " + name + "; })"); return true; } catch (e) { return false; }
    },
    loopBegin(f) {
      try {
        const collection = f();
        if (collection === null || typeof collection !== "object") {
          throw new RealTypeError("<foreach> array is not a collection: " + describe(collection));
        }
        const items = isArray(collection) ? apply(arraySlice, collection, []) : objectValues(collection);
        loops.push(items);
        return items.length;
      } catch (e) { throw safe(e); }
    },
    loopSet(item, index, i) {
      try {
        g[item] = loops[loops.length - 1][i];
        if (index !== null) g[index] = i;
      } catch (e) { throw safe(e); }
    },
    loopEnd() { loops.pop(); },
    snapshot(refreshKeys) {
      try { return snapshot(refreshKeys); } catch (e) { throw safe(e); }
    },
    // Returns whether the datamodel holds coercion hooks (see snapshot's "h" prefix).
    restore(text) {
      try { rebuild(text, null); return hooks; } catch (e) { throw safe(e); }
    },
  };
  const loadDeepFrozen = (o) => {
    if (o !== null && typeof o === "object") { objectValues(o).forEach(loadDeepFrozen); freeze(o); }
    return o;
  };
  freeze(engine);
  return function pick(name) { return engine[name]; };
})

// ==== codec: compiled on first use (loadCodec above) ====
(function (TAG, MAX_DEPTH, I) {
  "use strict";
  const { RealDate, DateProto, dateGetTime, RealRegExp, RegExpProto, regexpSource, regexpFlags,
          RealMap, MapProto, mapForEach, RealSet, SetProto, setForEach, RealWeakSet, RealWeakMap,
          ObjectProto, ArrayProto, arraySlice, fnToString, bigintToString, indirectEval,
          RealString, RealNumber, RealBigInt, RealTypeError, RealRangeError,
          freeze, isExtensible, getProto, gopd, defineProperty, ownKeys, apply, isArray, hasOwn } = I;
  const UNDEFINED = freeze({ [TAG]: "undefined" });
  const tooDeep = () => new RealRangeError("a value nests more than " + MAX_DEPTH + " levels deep");
  const HOOKS = new RealSet(["valueOf", "toString", "toJSON"]);

  // ---- a minimal read-only XML DOM for XML values (spec B.2: XML content becomes a DOM) ----
  // Frozen all through, so it is restored exactly as it was; xmlNodes brands the genuine ones.
  const xmlNodes = new RealWeakSet();
  class XmlNode {
    constructor(tree, parent) {
      this.parentNode = parent || null;
      if (typeof tree === "string") {
        this.nodeType = 3; this.nodeName = "#text"; this.nodeValue = tree; this.childNodes = freeze([]);
        xmlNodes.add(this);
        freeze(this);
        return;
      }
      this.nodeType = tree.document ? 9 : 1;
      this.nodeName = tree.document ? "#document" : tree.tag;
      this.tagName = tree.tag; this.localName = tree.local; this.namespaceURI = tree.ns || null;
      this.attributes = freeze(Object.assign({}, tree.attrs || {}));
      const children = tree.children || [];
      const nodes = new Array(children.length);
      for (let i = 0; i < children.length; i++) nodes[i] = new XmlNode(children[i], this);
      this.childNodes = freeze(nodes);
      this.markup = tree.markup;
      if (!parent) defineProperty(this, "tree", { value: tree, enumerable: false });
      xmlNodes.add(this);
      freeze(this);
    }
    get firstChild() { return this.childNodes[0] || null; }
    get documentElement() { return this.childNodes.find((c) => c.nodeType === 1) || null; }
    get textContent() {
      return this.nodeType === 3 ? this.nodeValue : this.childNodes.map((c) => c.textContent).join("");
    }
    getAttribute(name) { return hasOwn(this.attributes, name) ? this.attributes[name] : null; }
    hasAttribute(name) { return hasOwn(this.attributes, name); }
    getElementsByTagName(name) {
      const found = [];
      const stack = [this];
      while (stack.length) {
        const node = stack.pop();
        for (let i = node.childNodes.length - 1; i >= 0; i--) stack.push(node.childNodes[i]);
        if (node !== this && node.nodeType === 1 && (name === "*" || node.tagName === name || node.localName === name)) found.push(node);
      }
      return found;
    }
    toString() { return this.markup || this.textContent; }
  }
  freeze(XmlNode); freeze(XmlNode.prototype);
  // How many JSON levels the tree of a document takes (it is checked before it becomes
  // nodes: a damaged snapshot must be refused, not half built). `depth` is the level of the
  // tree object itself; a child element sits two levels below (inside "children").
  const treeDepths = new RealWeakMap();  // document node -> JSON levels its tree takes
  function xmlTreeDepth(tree, depth) {
    if (typeof tree === "string") return 0;
    if (depth > MAX_DEPTH) throw tooDeep();
    if (tree === null || typeof tree !== "object" || isArray(tree)) {
      throw new RealTypeError("malformed XML tree");
    }
    const children = tree.children === undefined ? [] : tree.children;
    if (!isArray(children)) throw new RealTypeError("malformed XML tree");
    let deepest = children.length ? 2 : 1;
    for (let i = 0; i < children.length; i++) {
      const below = xmlTreeDepth(children[i], depth + 2);
      if (below + 2 > deepest) deepest = below + 2;
    }
    return deepest;
  }
  const deepFreeze = (o) => {
    const stack = [o];
    while (stack.length) {
      const v = stack.pop();
      if (v !== null && typeof v === "object" && isExtensible(v)) {
        freeze(v);
        const ks = ownKeys(v);
        for (let i = 0; i < ks.length; i++) stack.push(v[ks[i]]);
      }
    }
    return o;
  };

  // ---- functions ---------------------------------------------------------------------------
  // Functions a restore gives back as they are: re-created from their source in the global
  // scope, then frozen (with their prototype object), so nothing on them can change later.
  const restoredFunctions = new RealWeakMap();  // function -> its source
  const COMPUTED_KEY = /^\s*(?:async\s+)?\*?\s*\[/;
  const NATIVE = /\{\s*\[native code\]\s*\}$/;
  // The function `source` is the text of, re-created the way a restore does, or undefined
  // when a restore could not (class bodies and computed method names would run code while
  // being re-created; getters, setters, private methods and native functions have no source
  // a restore can read).
  function functionFrom(source) {
    if (typeof source !== "string" || NATIVE.test(source) || /^\s*class\b/.test(source) ||
        COMPUTED_KEY.test(source)) {
      return undefined;
    }
    let f;
    try {
      f = indirectEval("(" + source + "\n)");
    } catch (e) {
      try {
        // Method shorthand (`m() {...}`) is only valid inside an object literal.
        const holder = indirectEval("({" + source + "\n})");
        const keys = ownKeys(holder);
        if (keys.length !== 1) return undefined;
        const d = gopd(holder, keys[0]);
        f = "value" in d ? d.value : undefined;
      } catch (e2) {
        return undefined;
      }
    }
    if (typeof f !== "function" || apply(fnToString, f, []) !== source) return undefined;
    const prototype = gopd(f, "prototype");
    if (prototype !== undefined && prototype.value !== null && typeof prototype.value === "object") {
      freeze(prototype.value);
    }
    freeze(f);
    restoredFunctions.set(f, source);
    return f;
  }

  // ---- encode: a value as tagged JSON -------------------------------------------------------
  // `state.exact` is cleared when the value would not be restored exactly as it is (the
  // snapshot then rebuilds the datamodel from its own text, so the live engine holds what a
  // restore would); `state.hooks` is set when an object holds a function under a name that
  // implicit conversions call; `state.functions` collects [source, function] made while
  // checking that a function restores, for the rebuild to use. Reads descriptors, never
  // properties through getters: it runs no chart code.
  function encode(value, path, seen, state, depth) {
    switch (typeof value) {
      case "undefined": return UNDEFINED;
      case "number":
        if (value - value === 0) return value === 0 && 1 / value < 0 ? { [TAG]: "number", v: "-0" } : value;
        return { [TAG]: "number", v: RealString(value) };
      case "string": case "boolean": return value;
      case "bigint": return { [TAG]: "bigint", v: apply(bigintToString, value, []) };
      case "symbol": state.exact = false; return UNDEFINED;
      case "function": return encodeFunction(value, state);
    }
    if (value === null) return null;
    if (depth > MAX_DEPTH) throw tooDeep();
    if (seen.has(value)) return { [TAG]: "ref", path: seen.get(value) };
    seen.set(value, path);
    const proto = getProto(value);
    if (xmlNodes.has(value)) {
      if (value.nodeType === 9) {
        if (depth + treeDepths.get(value) > MAX_DEPTH) throw tooDeep();
        return { [TAG]: "xml", v: value.markup, tree: gopd(value, "tree").value };
      }
      state.exact = false;
      return { [TAG]: "xml", v: value.markup || value.textContent, tree: null };
    }
    const extensible = isExtensible(value);
    if (proto === ArrayProto && isArray(value)) {
      const n = value.length;
      const keys = ownKeys(value);
      if (!extensible || keys.length !== n + 1) state.exact = false;
      const out = new Array(n);
      for (let i = 0; i < n; i++) {
        // (inline, like the object loop below: one engine frame per level of nesting)
        const d = gopd(value, i);
        if (d === undefined || !("value" in d)) { state.exact = false; out[i] = UNDEFINED; continue; }
        if (!d.writable || !d.enumerable || !d.configurable) state.exact = false;
        out[i] = encode(d.value, path.concat([i]), seen, state, depth + 1);
      }
      return out;
    }
    if (proto !== ObjectProto) {
      const special = encodeSpecial(value, proto, extensible, path, seen, state, depth);
      if (special !== undefined) return special;
      state.exact = false;  // a class instance, a typed array, an Error...: its own data
    } else if (!extensible) {
      state.exact = false;
    }
    // Its own enumerable data properties, as a plain object (inline: one engine frame per
    // level of nesting). An own "$sc" key wraps it in a tag object: one JSON level more.
    const wrapped = hasOwn(value, TAG);
    if (wrapped && depth + 1 > MAX_DEPTH) throw tooDeep();
    const childDepth = wrapped ? depth + 2 : depth + 1;
    const out = {};
    const keys = ownKeys(value);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      if (typeof key !== "string") { state.exact = false; continue; }
      const d = gopd(value, key);
      if (!d.enumerable) { state.exact = false; continue; }
      let item;
      if ("value" in d) {
        if (!d.writable || !d.configurable) state.exact = false;
        if (typeof d.value === "function" && HOOKS.has(key)) state.hooks = true;
        item = encode(d.value, path.concat([key]), seen, state, childDepth);
      } else {
        state.exact = false;  // a getter is not data: its value is not read, and not kept
        item = UNDEFINED;
      }
      defineProperty(out, key, { value: item, writable: true, enumerable: true, configurable: true });
    }
    return wrapped ? { [TAG]: "object", v: out } : out;
  }

  // A Date, RegExp, Map or Set (checked by its internal slots, not its prototype alone), or
  // undefined for anything else.
  function encodeSpecial(value, proto, extensible, path, seen, state, depth) {
    if (proto === DateProto) {
      let time;
      try { time = apply(dateGetTime, value, []); } catch (e) { time = undefined; }
      if (time !== undefined) {
        if (!extensible || ownKeys(value).length) state.exact = false;
        return { [TAG]: "date", v: time - time === 0 ? time : null };
      }
    } else if (proto === RegExpProto) {
      let source;
      try { source = apply(regexpSource, value, []); } catch (e) { source = undefined; }
      if (source !== undefined) {
        const keys = ownKeys(value);
        const last = gopd(value, "lastIndex");
        if (!extensible || keys.length !== 1 || !last || last.value !== 0) state.exact = false;
        return { [TAG]: "regexp", source: source, flags: apply(regexpFlags, value, []) };
      }
    } else if (proto === MapProto || proto === SetProto) {
      const isMap = proto === MapProto;
      const entries = [];
      try {
        apply(isMap ? mapForEach : setForEach, value, [(v, k) => { entries.push(isMap ? [k, v] : v); }]);
      } catch (e) {
        return undefined;
      }
      if (!extensible || ownKeys(value).length) state.exact = false;
      if (depth + 2 > MAX_DEPTH) throw tooDeep();
      const v = new Array(entries.length);
      for (let i = 0; i < entries.length; i++) {
        v[i] = isMap
          ? [encode(entries[i][0], path.concat(["#k" + i]), seen, state, depth + 3),
             encode(entries[i][1], path.concat(["#v" + i]), seen, state, depth + 3)]
          : encode(entries[i], path.concat(["#v" + i]), seen, state, depth + 2);
      }
      return { [TAG]: isMap ? "map" : "set", v: v };
    }
    return undefined;
  }

  function encodeFunction(f, state) {
    const known = restoredFunctions.get(f);
    if (known !== undefined) return { [TAG]: "function", source: known };
    state.exact = false;
    const source = apply(fnToString, f, []);
    // Round trip: written only if a restore can read it back.
    const again = functionFrom(source);
    if (again === undefined) return UNDEFINED;
    state.functions.push([source, again]);
    return { [TAG]: "function", source: source };
  }

  // ---- decode: tagged JSON as a value ---------------------------------------------------------
  const malformed = (what) => new RealTypeError("malformed " + JSON.stringify(TAG) + " value: " + what);
  const keyOf = (path) => JSON.stringify(path);
  const plainSet = (o, key, value) => defineProperty(o, key, { value: value, writable: true, enumerable: true, configurable: true });

  // `fresh` ([source, function] pairs from the snapshot that wrote the text) saves compiling a
  // function twice; `found.hooks` is set like encode's state.hooks.
  function decode(value, path, byPath, refs, depth, fresh, found) {
    if (value === null || typeof value !== "object") return value;
    if (depth > MAX_DEPTH) throw tooDeep();
    if (isArray(value)) {
      const out = new Array(value.length);
      byPath.set(keyOf(path), out);
      for (let i = 0; i < value.length; i++) out[i] = decode(value[i], path.concat([i]), byPath, refs, depth + 1, fresh, found);
      return out;
    }
    const tag = hasOwn(value, TAG) ? value[TAG] : undefined;
    if (tag === undefined || tag === "object") {
      let from = value;
      if (tag === "object") {
        from = value.v;
        if (from === null || typeof from !== "object" || isArray(from)) throw malformed("object");
        depth += 1;
      }
      const out = {};
      byPath.set(keyOf(path), out);
      const keys = ownKeys(from);
      for (let i = 0; i < keys.length; i++) {
        // (defined, not assigned: a "__proto__" key is a property, not a prototype; inline:
        // one engine frame per level of nesting)
        plainSet(out, keys[i], decode(from[keys[i]], path.concat([keys[i]]), byPath, refs, depth + 1, fresh, found));
      }
      return out;
    }
    const v = value.v;
    switch (tag) {
      case "undefined": return undefined;
      case "number": {
        if (typeof v !== "string" || !/^(?:NaN|-?Infinity|-0|-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)$/.test(v)) throw malformed("number");
        return RealNumber(v);
      }
      case "bigint": {
        if (typeof v !== "string" || !/^-?\d+$/.test(v)) throw malformed("bigint");
        return RealBigInt(v);
      }
      case "function": {
        let f;
        if (fresh !== null && fresh !== undefined) {
          for (let i = 0; i < fresh.length; i++) {
            if (fresh[i] !== null && fresh[i][0] === value.source) { f = fresh[i][1]; fresh[i] = null; break; }
          }
        }
        if (f === undefined) f = functionFrom(value.source);
        if (f === undefined) throw malformed("function (its source is not one this engine can re-create)");
        if (found && HOOKS.has(path[path.length - 1])) found.hooks = true;
        return f;
      }
      case "date": {
        if (v !== null && typeof v !== "number") throw malformed("date");
        const d = new RealDate(v === null ? NaN : v);
        byPath.set(keyOf(path), d);
        return d;
      }
      case "regexp": {
        if (typeof value.source !== "string" || typeof value.flags !== "string") throw malformed("regexp");
        const r = new RealRegExp(value.source, value.flags);
        byPath.set(keyOf(path), r);
        return r;
      }
      case "xml": {
        if (typeof v !== "string") throw malformed("xml");
        if (value.tree === null || value.tree === undefined) return RealString(v);
        const levels = xmlTreeDepth(value.tree, depth + 1);
        const node = new XmlNode(deepFreeze(value.tree), null);
        treeDepths.set(node, levels);
        byPath.set(keyOf(path), node);
        return node;
      }
      case "ref": {
        if (!isArray(value.path)) throw malformed("ref");
        const holder = { target: undefined };
        refs.push([holder, value.path]);
        return holder;
      }
      case "map": {
        if (!isArray(v)) throw malformed("map");
        const m = new RealMap();
        byPath.set(keyOf(path), m);
        for (let i = 0; i < v.length; i++) {
          if (!isArray(v[i]) || v[i].length !== 2) throw malformed("map");
          m.set(decode(v[i][0], path.concat(["#k" + i]), byPath, refs, depth + 3, fresh, found),
                decode(v[i][1], path.concat(["#v" + i]), byPath, refs, depth + 3, fresh, found));
        }
        return m;
      }
      case "set": {
        if (!isArray(v)) throw malformed("set");
        const s = new RealSet();
        byPath.set(keyOf(path), s);
        for (let i = 0; i < v.length; i++) s.add(decode(v[i], path.concat(["#v" + i]), byPath, refs, depth + 2, fresh, found));
        return s;
      }
      default:
        throw malformed("unknown tag " + RealString(tag));
    }
  }

  // Replace reference placeholders (objects shared or cyclic at snapshot time).
  function link(root, refs, byPath) {
    if (!refs.length) return root;
    const holders = new RealMap();
    for (let i = 0; i < refs.length; i++) {
      const target = byPath.get(keyOf(refs[i][1]));
      if (target === undefined) throw malformed("ref (no value at " + keyOf(refs[i][1]) + ")");
      holders.set(refs[i][0], target);
    }
    const done = new RealSet();
    const fix = (node) => {
      if (node === null || typeof node !== "object") return node;
      if (holders.has(node)) return holders.get(node);
      if (done.has(node) || xmlNodes.has(node) || getProto(node) === DateProto || getProto(node) === RegExpProto) return node;
      done.add(node);
      if (node instanceof RealMap) {
        const entries = Array.from(node.entries());
        node.clear();
        for (const [k, v] of entries) node.set(fix(k), fix(v));
        return node;
      }
      if (node instanceof RealSet) {
        const members = Array.from(node.values());
        node.clear();
        for (const v of members) node.add(fix(v));
        return node;
      }
      const keys = ownKeys(node);
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i];
        const d = gopd(node, key);
        if ("value" in d && d.value !== null && typeof d.value === "object") {
          const fixed = fix(d.value);
          if (fixed !== d.value) plainSet(node, key, fixed);
        }
      }
      return node;
    };
    return fix(root);
  }

  return { XmlNode, xmlNodes, encode, decode, link };
})
