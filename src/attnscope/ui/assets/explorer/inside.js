// Part 7: Inside one head (the "inside" mode): one head's computation for the kind, layer, head, decoding step
// and query token picked here, from viz/inside.py's payload (the traced intermediates of the whole translation: the
// decoder is causal, so step t's numbers are the first t+1 rows of it). Parts 8-9 draw the views.

// A sentence's traced arrays by name, gathered from every payload of that sentence: a layer fetched once stays.
class Traced {
  constructor(header) {
    this.h = header;
    this.arrays = new Map();
  }
  add(header, floats) {
    this.h = header;
    for (const [name, [offset, shape]] of Object.entries(header.arrays)) {
      const n = shape.reduce((a, b) => a * b, 1);
      this.arrays.set(name, { a: floats.subarray(offset, offset + n), shape });
    }
  }
  has(kind, layer) { return this.arrays.has(`${kind}.${layer}.q`); }
  at(name, ...index) {  // the sub-array at the leading `index` of array `name` (null where the model has none)
    const x = this.arrays.get(name);
    if (!x) return null;
    let offset = 0, size = x.a.length;
    index.forEach((i, d) => { size /= x.shape[d]; offset += i * size; });
    return x.a.subarray(offset, offset + size);
  }
  rows(name, first, n, ...index) {  // n consecutive rows from `first` under `index`, as arrays
    return [...Array(n).keys()].map((j) => this.at(name, ...index, first + j));
  }
}

// One head and one query at one step, as the page shows it (engine/inside/head_view.py computes the same in Python):
// the captured arrays cut to this head, query and step, and the breakdowns of Eq. 1 and of W^O computed from them.
function headView(w, s) {
  const h = w.h, kind = s.kind, head = s.head === null ? 0 : s.head, step = s.step, query = s.query;
  const name = (what) => `${kind}.${s.layer}.${what}`;
  const [H, , dh] = w.arrays.get(name("q")).shape, D = w.arrays.get(name("output")).shape[1];
  const queryTokens = kind === "encoder" ? h.source : h.target.slice(0, step + 1);
  const keyTokens = kind === "decoder" ? h.target.slice(0, step + 1) : h.source, K = keyTokens.length;
  const q = w.at(name("q"), head, query), k = w.rows(name("k"), 0, K, head), v = w.rows(name("v"), 0, K, head);
  const products = k.map((kj) => Float32Array.from(kj, (x, d) => Math.fround(q[d] * x)));
  const dots = products.map((p) => p.reduce((a, b) => a + b, 0));
  const cut = (what) => { const a = w.at(name(what), head, query); return a ? a.subarray(0, K) : null; };
  const scores = cut("scores"), weights = cut("weights"), bias = cut("bias"), scale = h.kinds[kind].scale;
  const masked = Array.from(scores, (x) => !Number.isFinite(x));
  const concat = w.at(name("concat"), query), wo = w.at(name("w_o")), bo = w.at(name("b_o"));
  const contributions = [...Array(H).keys()].map((hd) => {
    const out = new Float64Array(D);
    for (let o = 0; o < D; o++) {
      let sum = 0;
      for (let d = 0; d < dh; d++) sum += concat[hd * dh + d] * wo[o * H * dh + hd * dh + d];
      out[o] = sum;
    }
    return out;
  });
  const stream = kind === "encoder" ? "source" : "target";
  const keyInputs = kind === "cross" ? w.rows("memory", 0, K) : w.rows(name(h.norm === "pre" ? "norm_output" : "residual"), 0, K);
  const terms = dots.map((x, j) => (masked[j] ? -Infinity : x * scale + (bias ? bias[j] : 0)));
  const top = Math.max(...terms.filter(Number.isFinite)), e = terms.map((x) => (Number.isFinite(x) ? Math.exp(x - top) : 0));
  const total = e.reduce((a, b) => a + b, 0), recomputed = e.map((x) => x / total);
  const row = (what) => w.at(name(what), query);
  return {
    kind, layer: s.layer, head, mean: s.head === null, step, query, queryTokens, keyTokens, H, dh, D, scale,
    norm: h.norm, normKind: h.norm_kind, relative: h.relative, embedNorm: h.embed_norm,
    embedding: { token: w.at(`${stream}.token_embedding`, query), scale: h.scales[stream],
      position: w.at(`${stream}.position`, query), total: w.at(`${stream}.total`, query) },
    layerInput: row("residual"), queryInput: row(h.norm === "pre" ? "norm_output" : "residual"), keyInputs,
    q, k, v, products, dots, bias, scores, weights, masked, recomputed,
    maskMatrix: w.rows(name("scores"), 0, queryTokens.length, head)
      .map((r) => Array.from(r.subarray(0, K), (x) => !Number.isFinite(x))),
    weighted: v.map((vj, j) => Float32Array.from(vj, (x) => Math.fround(weights[j] * x))),
    headOutput: concat.subarray(head * dh, (head + 1) * dh), concat, contributions, outBias: bo,
    attentionOutput: row("output"), residual: row("residual"), normInput: row("norm_input"), normOutput: row("norm_output"),
    blockOutput: row("block_output"), gap: w.at(name("gap"), head, query)[0],
    recomputedGap: Math.max(...recomputed.map((x, j) => Math.abs(x - weights[j]))),
  };
}

Object.assign(Explorer.prototype, {
  receiveInside(header, floats) {
    const same = this.w && header.id === this.w.h.id, moved = header.epoch !== this.epoch;
    const waiting = same && !this.w.has(this.sel.kind, this.sel.layer);
    this.epoch = header.epoch;
    if (!same) this.w = new Traced(header);
    this.w.add(header, floats);
    if (same && !moved && !waiting) return;  // a rerun after a pick here: the browser's own view stands
    if (!same || moved) {
      if (!same) this.queries = {};
      if (same) this.sel = this.fit(header.selection); else this.reopen(header);
    }
    if (!same) this.buildInside();
    this.render();
  },

  fitQuery(out, s) {  // the query token of `out`'s kind: a new step opens the token the decoder reads at it
    const prev = this.sel || {}, n = out.kind === "encoder" ? this.w.h.source.length : out.step + 1;
    let q = s.query;
    if (prev.kind && out.kind !== prev.kind) q = this.queries[out.kind];
    else if (prev.kind && out.kind !== "encoder" && out.step !== prev.step) q = out.step;
    if (q === undefined || q === null) q = out.kind === "encoder" ? 0 : out.step;
    const query = Math.max(0, Math.min(q | 0, n - 1));
    this.queries[out.kind] = query;
    return { ...out, query };
  },

  buildInside() {
    const r = this.root, n = this.w.h.target.length;
    r.replaceChildren();
    r.dataset.mode = "inside";
    this.tip = el("div", "tip");
    this.bar = el("div", "bar");
    this.controls = el("div", "controls");
    this.slider = el("input", "slider");
    Object.assign(this.slider, { type: "range", min: 0, max: n - 1, step: 1 });
    this.slider.setAttribute("aria-label", "Decoding step");
    this.slider.addEventListener("input", () => this.set({ step: Number(this.slider.value) }));
    this.stepShown = el("span", "label");
    this.select = el("select");
    this.select.setAttribute("aria-label", "Query token");
    this.select.addEventListener("change", () => this.set({ query: Number(this.select.value) }));
    const step = n > 1 ? [el("span", "label", "Decoding step"), this.slider, this.stepShown] : [];
    this.controls.append(...step, el("span", "label", "Query token"), this.select);
    this.missing = el("div", "missing");
    this.body = el("div", "inside");
    r.append(this.bar, this.controls, this.missing, this.body, this.tip);
  },

  renderInside() {
    const h = this.w.h, s = this.sel, info = h.kinds[s.kind];
    const kinds = this.buttons("", KINDS.map((k) => [k, h.labels[k]]), s.kind, (kind) => this.set({ kind }));
    const layers = this.buttons("Layer", [...Array(info.n_layers).keys()].map((l) => [l, String(l)]), s.layer,
      (layer) => this.set({ layer }));
    const heads = this.buttons("Head", [...Array(info.heads).keys()].map((x) => [x, String(x)]), s.head === null ? 0 : s.head,
      (head) => this.set({ head }));
    this.bar.replaceChildren(kinds, layers, heads);
    this.slider.value = String(s.step);
    this.stepShown.textContent = `${s.step} (shared with the Step page)`;
    const tokens = s.kind === "encoder" ? h.source : h.target.slice(0, s.step + 1);
    this.select.replaceChildren(...tokens.map((t, i) => Object.assign(el("option", "", `${i}: ${t}`), { value: String(i) })));
    this.select.value = String(s.query);
    if (!this.w.has(s.kind, s.layer)) {
      this.missing.textContent = `Fetching layer ${s.layer} from the server…`;
      this.body.replaceChildren();
      return this.fetch(s.layer);
    }
    this.missing.textContent = "";
    this.drawInside(headView(this.w, s));
  },
});
