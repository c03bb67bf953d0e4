// attnscope's attention explorer, part 1 (ui/explorer.py joins the parts into one module, in its JS_PARTS order):
// the constants, colours and token labels every view shares, the payload's reader (viz/explorer.py writes it) and
// the weights it holds.

const BLUES = [[247, 251, 255], [222, 235, 247], [198, 219, 239], [158, 202, 225], [107, 174, 214],
  [66, 146, 198], [33, 113, 181], [8, 81, 156], [8, 48, 107]];  // ColorBrewer "Blues", as the plotly figures use
const MASKED = [217, 217, 217];  // cells a mask forbids (future positions): grey, not 0
const KINDS = ["encoder", "decoder", "cross"];
const KIND_LABELS = { encoder: "Encoder self-attention", decoder: "Decoder masked self-attention", cross: "Cross-attention" };
const KIND_KEYS = { e: "encoder", d: "decoder", c: "cross" };
const PLAY_MS = 600;  // between steps while playing
const SEND_MS = 400;  // the selection goes to the server once the user pauses this long: each send is a page rerun
// A selection not yet sent, kept for whichever explorer is mounted next (the user may leave the page before the pause
// ends: the next explorer, on any page, sends it; sending from a leaving one would rerun the page being left).
let pending = null;
// What each explorer showed last (by what its payload shows: the record, the mode, the kind, the title) and on which
// epoch: Streamlit may build the element anew on a page rerun, and the new one opens where the user left it, not
// where the payload opened (its selection stays as first sent, so that a rerun's bytes are the bytes sent before).
const shown = new Map();
const slot = (h) => [h.id, h.mode, h.kind || "", h.title || ""].join("|");
const SELECTED = ["kind", "layer", "head", "step"];  // what a selection holds (Inside one head adds its query token)
const LABEL_PX = 11;  // a label needs this many pixels of cell; fewer: every n-th label (zoom in for all)

// plotly's "RdBu_r": signed values (vector components) blue below 0, white at 0, red above, as on the server's charts
const RDBU = [[5, 48, 97], [33, 102, 172], [67, 147, 195], [146, 197, 222], [209, 229, 240], [247, 247, 247],
  [253, 219, 199], [244, 165, 130], [214, 96, 77], [178, 24, 43], [103, 0, 31]];

function ramp(stops, t) {  // the colour at t in [0, 1] (clipped) between evenly spaced stops
  if (!(t >= 0)) t = 0;
  if (t > 1) t = 1;
  const x = t * (stops.length - 1), i = Math.min(Math.floor(x), stops.length - 2), f = x - i;
  return stops[i].map((a, j) => Math.round(a + (stops[i + 1][j] - a) * f));
}

function colour(t) { return ramp(BLUES, t); }

function signed(t) { return ramp(RDBU, ((t || 0) + 1) / 2); }  // t in [-1, 1]

function css([r, g, b]) { return `rgb(${r},${g},${b})`; }

function diverging(t) {  // -1 blue, 0 white, +1 red (a difference A − B)
  const x = Math.max(-1, Math.min(1, t)), end = x < 0 ? [33, 102, 172] : [178, 24, 43], f = Math.abs(x);
  return [255, 255, 255].map((w, j) => Math.round(w + (end[j] - w) * f));
}

function tokensOf(t, kind) {  // [query tokens, key tokens] of one kind of a record's tokens {source, target, output}
  const rows = kind === "encoder" ? t.source : kind === "cross" && t.output ? t.output : t.target;
  return [rows, kind === "decoder" ? t.target : t.source];
}

function numbered(tokens) { return tokens.map((x, i) => `${i}: ${x}`); }

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function readPayload(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const magic = String.fromCharCode(bytes[0], bytes[1], bytes[2], bytes[3]);
  if (magic !== "ATSX") throw new Error("not an attnscope explorer payload");
  const length = view.getUint32(8, true);
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(12, 12 + length)));
  const start = (12 + length + 3) & ~3;
  return { header, start };
}

// One sentence's weights: values by (kind, layer, head, query, key), and whole maps (cached, means computed here).
class Weights {
  constructor(header, floats) {
    this.h = header;
    this.f = floats;
    this.maps = new Map();
  }
  info(kind) { return this.h.kinds[kind]; }
  has(kind, layer) { return this.info(kind).layers.includes(layer); }
  value(kind, layer, head, q, k) {
    const info = this.info(kind), li = info.layers.indexOf(layer);
    if (li < 0) return NaN;  // a layer this payload does not hold
    if (info.lower) {
      if (k > q) return NaN;
      return this.f[info.offset + (li * info.heads + head) * (info.queries * (info.queries + 1) / 2) + q * (q + 1) / 2 + k];
    }
    return this.f[info.offset + ((li * info.heads + head) * info.queries + q) * info.keys + k];
  }
  map(kind, layer, head) {  // [Q * K], NaN where masked; head null: the mean of heads
    const key = `${kind}|${layer}|${head}`;
    if (this.maps.has(key)) return this.maps.get(key);
    const info = this.info(kind), Q = info.queries, K = info.keys;
    const heads = head === null ? [...Array(info.heads).keys()] : [head];
    const out = head === null ? new Float64Array(Q * K) : new Float32Array(Q * K);
    for (let q = 0; q < Q; q++) for (let k = 0; k < K; k++) {
      let s = 0;
      for (const h of heads) s += this.value(kind, layer, h, q, k);
      out[q * K + k] = heads.length === 1 ? s : s / heads.length;
    }
    this.maps.set(key, out);
    return out;
  }
}
