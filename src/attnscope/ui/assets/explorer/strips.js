// Part 8: Inside one head's vectors as heat strips, one row per vector, blue below 0 and red above (white at 0).
// A head's vectors (d_k values) have a cell per dimension, all rows on one colour scale; a longer vector (d_model) is
// one band of stripes on its own scale, its ±range written after it, so a band of small values is as legible as one
// of large values. Hover names the row, the dimension and the value the model computed (and a band's norm).

const WIDE = 64;  // dimensions above which a vector is one band on its own scale

function g3(x) { return String(Number(x.toPrecision(3))); }

function numberedAll(tokens) { return tokens.map((t, i) => `${i}: ${t}`); }

function limitOf(values) {
  let m = 0;
  for (const x of values) if (Math.abs(x) > m) m = Math.abs(x);
  return m || 1;
}

function summary(values, first = 0) {  // a band's hover: its norm and its extreme dimensions
  let lo = 0, hi = 0, sq = 0;
  values.forEach((x, i) => { sq += x * x; if (x < values[lo]) lo = i; if (x > values[hi]) hi = i; });
  return `dimensions ${first}…${first + values.length - 1}: norm ${Math.sqrt(sq).toFixed(4)}, min ${values[lo].toFixed(4)} ` +
    `(dim ${first + lo}), max ${values[hi].toFixed(4)} (dim ${first + hi})`;
}

function insideView(parent, name, title) {  // a titled view of the page
  const box = el("div", "view");
  box.dataset.name = name;
  box.dataset.title = title;
  box.append(el("div", "t", title));
  parent.append(box);
  return box;
}

function gradient(stops) { return `linear-gradient(to right,${stops.map(css).join(",")})`; }

function legendLine(text, stops, low, high) {  // "text: low [colour bar] high"
  const line = el("div", "s", `${text}: ${low}`), bar = el("span", "g");
  bar.style.background = gradient(stops);
  line.append(bar, document.createTextNode(high));
  return line;
}

function bandLegend(label, where = "after each band") {
  const line = legendLine(label, RDBU, "−max", "+max");
  line.append(document.createTextNode(`, each band on its own scale (±max written ${where})`));
  return line;
}

function strips(parent, tip, name, rows, labels, { title, sums, what = "value" }) {
  const box = insideView(parent, name, title), n = rows[0].length, wide = n > WIDE;
  const limits = wide ? rows.map(limitOf) : Array(rows.length).fill(Math.max(...rows.map(limitOf)));
  const tail = (r) => [wide ? `±${g3(limits[r])}` : "", sums ? `Σ = ${sums[r].toFixed(4)}` : ""].filter(Boolean).join("  ");
  new Cells(box, tip, name).draw({
    title, rows: labels, cols: [...Array(n).keys()].map(String), get: (r, c) => rows[r][c], scale: () => 1,
    paint: (v, r) => signed(v / limits[r]), cellW: wide ? Math.max(1, Math.min(11, 640 / n)) : 11, cellH: 14,
    value: what, rowName: "", colName: "dim", noColLabels: true, labelMax: 380, tail: wide || sums ? tail : undefined,
    note: wide ? (r) => summary(rows[r]) : undefined });
  const key = `${what} (${n} dimensions)`;
  box.append(wide ? bandLegend(key) : legendLine(key, RDBU, g3(-limits[0]), g3(limits[0])));
}

function formulaOf(v) { return `softmax(${v.scale !== 1 ? "QKᵀ / √d_k" : "QKᵀ"}${v.bias ? " + B" : ""})`; }

Object.assign(Explorer.prototype, {
  inputStrips(parent, v) {  // embedding × √d_model (or unscaled) + PE, a norm (BART), the block's input, W_Q's input
    const e = v.embedding, token = v.queryTokens[v.query], norm = v.normKind, scaled = e.scale !== 1;
    const labels = [scaled ? `embedding(${token}) × √d_model = ×${e.scale.toFixed(1)}` : `embedding(${token}) (not scaled)`,
      v.relative ? "no positional encoding: zeros (positions are a bias on the scores, step 3)" : `positional encoding PE(${v.query})`,
      v.embedNorm ? `${norm} of the sum: the first layer's input` : "sum: the first layer's input",
      `input of layer ${v.layer}'s block`, `what W_Q multiplies${v.norm === "pre" ? ` (${norm} of the block input: pre-LN)` : ""}`];
    const section = scaled ? "section 3.4: embeddings × √d_model" : "this model leaves out section 3.4's multiplication by √d_model";
    const added = v.relative ? "no positional encoding added (T5)" : "section 3.5: + positional encoding";
    const rows = [Float32Array.from(e.token, (x) => Math.fround(x * e.scale)), e.position, e.total, v.layerInput, v.queryInput];
    strips(parent, this.tip, "inputs", rows, labels,
      { title: `Inputs of “${token}” (${section}; ${added}${v.embedNorm ? `; then ${norm}` : ""})` });
  },

  keyInputStrips(parent, v) {
    const where = v.kind === "cross" ? "the encoder's output (memory)" : `layer ${v.layer}'s input, every position`;
    strips(parent, this.tip, "key-inputs", v.keyInputs, numberedAll(v.keyTokens),
      { title: `Keys and values are projected from ${where}` });
  },

  qkStrips(parent, v) {  // q = x·W_Q, k_j = x_j·W_K (section 3.2.2)
    const labels = [`q  (${v.query}: ${v.queryTokens[v.query]})`, ...numberedAll(v.keyTokens).map((k) => `k  ${k}`)];
    strips(parent, this.tip, "qk", [v.q, ...v.k], labels,
      { title: `Query and keys of head ${v.head} (q = x·W_Qᵢ, k = x·W_Kᵢ; d_k = ${v.dh})` });
  },

  productStrips(parent, v) {  // q∘k_j element by element; each row sums to q·k_j
    strips(parent, this.tip, "products", v.products, numberedAll(v.keyTokens).map((k) => `q∘k  ${k}`),
      { title: "q∘k: the dot product term by term (Eq. 1's QKᵀ, one row of it); Σ = q·k", sums: v.dots, what: "q·k term" });
  },

  valueStrips(parent, v) {  // the values, each scaled by its weight, and their sum: this head's output (Eq. 1's ·V)
    const keys = numberedAll(v.keyTokens);
    const labels = [...keys.map((k) => `v  ${k}`), ...keys.map((k, j) => `${v.weights[j].toFixed(2)} × v  ${k}`),
      `Σ = head ${v.head}'s output`];
    strips(parent, this.tip, "values", [...v.v, ...v.weighted, v.headOutput], labels,
      { title: `Values, weighted values and their sum: ${formulaOf(v)}·V (Eq. 1)` });
  },

  contributionStrips(parent, v) {  // each head's slice through its own columns of W^O, the bias, their sum
    const labels = [...Array(v.H).keys()].map((h) => `${h === v.head ? "▶ " : ""}head ${h} · W^O[${h * v.dh}:${(h + 1) * v.dh}]`);
    const bias = v.outBias ? [v.outBias] : [];
    const plus = v.outBias ? " + b^O" : " (W^O has no bias)";
    strips(parent, this.tip, "contributions", [...v.contributions, ...bias, v.attentionOutput],
      [...labels, ...bias.map(() => "bias b^O"), "Σ = attention output (into the residual stream)"],
      { title: `Concat·W^O = Σ over heads of head_i·W^O_i${plus}: each head's contribution (section 3.2.2)` });
  },

  residualStrips(parent, v) {  // the block around the attention: post-LN (the paper's) or pre-LN, with its norm
    const norm = v.normKind, post = v.norm === "post";
    const rows = post ? [v.residual, v.attentionOutput, v.normInput, v.blockOutput]
      : [v.residual, v.normOutput, v.attentionOutput, v.blockOutput];
    const labels = post ? ["x (block input)", "Sublayer(x): attention output", "x + Sublayer(x)", `${norm}(x + Sublayer(x)): block output`]
      : ["x (block input)", `${norm}(x): what the attention reads`, `Sublayer(${norm}(x))`, `x + Sublayer(${norm}(x)): block output`];
    let title = post ? `Residual + ${norm} (section 3.1): ${norm}(x + Sublayer(x))`
      : `Pre-LN residual block: x + Sublayer(${norm}(x)) (this model normalises before the sublayer)`;
    if (norm === "RMSNorm") title += "; RMSNorm(x) = x / √(mean(x²) + ε) × g: no mean subtracted, no bias";
    strips(parent, this.tip, "residual", rows, labels, { title });
  },
});
