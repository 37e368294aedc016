'use strict';
// parseForm's object: a urlencoded body as body-parser's urlencoded parser
// with extended: true (Kyma's runtimes) reads it, through qs: brackets
// nest ("a[b][c]=1" is { a: { b: { c: '1' } } }), "a[]=x" and "a[0]=x"
// give arrays (indices up to 20; a larger one is an object's key, and the
// holes of an array close), a repeated key gives an array, and a key that
// would overwrite a property of Object.prototype ("__proto__",
// "hasOwnProperty", ...) is dropped. The objects are plain objects, so a
// handler's event.data.hasOwnProperty(...) works. More than 1,000
// parameters is body-parser's 413 "too many parameters".

const PARAMETER_LIMIT = 1000;
const ARRAY_LIMIT = 20;
const DEPTH = 32; // body-parser 2's depth: deeper brackets stay in one key

const own = Object.prototype.hasOwnProperty;

// tooManyParameters is what the caller answers 413.
class TooManyParameters extends Error {
  constructor() {
    super('too many parameters');
    this.status = 413;
  }
}

// keyPath splits "a[b][c]" into ['a', 'b', 'c'] ("a[]" into ['a', '']);
// brackets past DEPTH stay one segment, text after the last ']' is
// dropped, and a key that does not start with a name is one segment.
function keyPath(key) {
  const open = key.indexOf('[');
  if (open <= 0) return [key];
  const path = [key.slice(0, open)];
  let i = open;
  while (i < key.length && key[i] === '[') {
    const close = key.indexOf(']', i);
    if (close === -1) break;
    if (path.length > DEPTH) {
      path.push(key.slice(i));
      return path;
    }
    path.push(key.slice(i + 1, close));
    i = close + 1;
  }
  if (i < key.length && path.length === 1) return [key];
  return path;
}

function arrayIndex(seg) {
  if (!/^(0|[1-9][0-9]?)$/.test(seg)) return -1;
  const n = Number(seg);
  return n <= ARRAY_LIMIT ? n : -1;
}

// combine puts value under key of target as qs merges a repeated key:
// the first stays, the next make an array.
function combine(target, key, value) {
  if (!own.call(target, key)) target[key] = value;
  else if (Array.isArray(target[key])) target[key].push(value);
  else target[key] = [target[key], value];
}

// toObject turns an array into an object of its indices, for a key that
// is not an index.
function toObject(arr) {
  const o = {};
  arr.forEach((v, i) => { if (v !== undefined) o[i] = v; });
  return o;
}

// place sets value at path under target.
function place(target, path, value) {
  const key = path[0];
  if (Array.isArray(target) && key !== '' && arrayIndex(key) === -1) return place(toObject(target), path, value);
  if (!Array.isArray(target) && own.call(Object.prototype, key)) return target; // never Object.prototype's
  if (path.length === 1) {
    if (Array.isArray(target)) {
      if (key === '') target.push(value);
      else if (target[arrayIndex(key)] === undefined) target[arrayIndex(key)] = value;
      else target[arrayIndex(key)] = [].concat(target[arrayIndex(key)], value);
    } else combine(target, key, value);
    return target;
  }
  const next = path[1];
  const wantArray = next === '' || arrayIndex(next) !== -1;
  if (Array.isArray(target)) {
    const i = key === '' ? target.length : arrayIndex(key);
    const child = target[i];
    target[i] = place(child !== undefined && typeof child === 'object' ? child : (wantArray ? [] : {}), path.slice(1), value);
    return target;
  }
  let child = own.call(target, key) ? target[key] : undefined;
  if (child === undefined) child = wantArray ? [] : {};
  else if (typeof child !== 'object') {
    // "a=1&a[b]=2": qs keeps both.
    target[key] = [child, place(wantArray ? [] : {}, path.slice(1), value)];
    return target;
  }
  target[key] = place(child, path.slice(1), value);
  return target;
}

// compact closes the holes of the arrays under v.
function compact(v) {
  if (Array.isArray(v)) return v.filter((x) => x !== undefined).map(compact);
  if (v !== null && typeof v === 'object') {
    for (const k of Object.keys(v)) v[k] = compact(v[k]);
  }
  return v;
}

// parseExtended parses str (already in text) with decode for its escapes.
function parseExtended(str, decode) {
  const out = {};
  if (!str) return out;
  let count = 0;
  for (const part of str.split('&')) {
    if (part === '') continue;
    if (++count > PARAMETER_LIMIT) throw new TooManyParameters();
    const bracketEq = part.indexOf(']=');
    const eq = bracketEq === -1 ? part.indexOf('=') : bracketEq + 1;
    const key = decode(eq === -1 ? part : part.slice(0, eq));
    if (key === '') continue;
    const value = eq === -1 ? '' : decode(part.slice(eq + 1));
    place(out, keyPath(key), value);
  }
  return compact(out);
}

module.exports = { parseExtended, TooManyParameters };
