/* The course model fills blanks in the reader's browser: a plain-JavaScript forward pass of
 * BertForMaskedLM (post-LayerNorm BERT, exact GELU, no dropout) over the float16 weights that
 * bertfamily.webmodel exports, with bert-base-uncased's WordPiece tokenizer as `tokenizers` runs it
 * (BertNormalizer, BertPreTokenizer, greedy longest-match WordPiece) and the course's compact vocabulary.
 *
 * Nothing is fetched until the reader first asks; then two files come from this site
 * (_static/course-model/course-model.json and .bin). Nothing is sent anywhere.
 * On a page with a cell tagged `browser-fill` (lesson 1), a labelled form replaces that cell's
 * widget (which needs a kernel); without JavaScript the page stays as built.
 * tests/test_webmodel.py runs the same core in Node against torch; tests/test_browser_fill.py in Chromium.
 */
(function (root) {
  "use strict";

  // ------------------------------------------------------------------ float16 -> float32
  function halfTable() {
    const table = new Float32Array(65536);
    for (let h = 0; h < 65536; h++) {
      const sign = h & 0x8000 ? -1 : 1, exponent = (h >> 10) & 0x1f, fraction = h & 0x3ff;
      if (exponent === 0) table[h] = sign * Math.pow(2, -14) * (fraction / 1024);
      else if (exponent === 31) table[h] = fraction ? NaN : sign * Infinity;
      else table[h] = sign * Math.pow(2, exponent - 15) * (1 + fraction / 1024);
    }
    return table;
  }

  function tensors(manifest, buffer) {
    const halves = new Uint16Array(buffer), table = halfTable(), out = {};
    for (const t of manifest.tensors) {
      const values = new Float32Array(t.count);
      const start = t.offset / 2;
      for (let i = 0; i < t.count; i++) values[i] = table[halves[start + i]];
      out[t.name] = values;
    }
    return out;
  }

  // ------------------------------------------------------------------ the tokenizer
  const PUNCTUATION = /[\p{P}!-\/:-@\[-`{-~]/u;
  const WHITESPACE = /\s/u;
  const CONTROL = /[\p{Cc}\p{Cf}\p{Co}\p{Cn}]/u;
  const MARK = /\p{Mn}/u;

  function isChinese(code) {
    return (code >= 0x4E00 && code <= 0x9FFF) || (code >= 0x3400 && code <= 0x4DBF) ||
      (code >= 0x20000 && code <= 0x2A6DF) || (code >= 0x2A700 && code <= 0x2B73F) ||
      (code >= 0x2B740 && code <= 0x2B81F) || (code >= 0x2B920 && code <= 0x2CEAF) ||
      (code >= 0xF900 && code <= 0xFAFF) || (code >= 0x2F800 && code <= 0x2FA1F);
  }

  /* BertNormalizer: clean the text, space out CJK characters, strip accents, lower-case. */
  function normalize(text, lowercase) {
    let out = "";
    for (const ch of text) {
      const code = ch.codePointAt(0);
      if (code === 0 || code === 0xFFFD) continue;
      if (ch === "\t" || ch === "\n" || ch === "\r") { out += " "; continue; }
      if (CONTROL.test(ch)) continue;
      if (WHITESPACE.test(ch)) { out += " "; continue; }
      out += isChinese(code) ? " " + ch + " " : ch;
    }
    if (lowercase) {
      out = Array.from(out.normalize("NFD")).filter(ch => !MARK.test(ch)).join("").toLowerCase();
    }
    return out;
  }

  /* BertPreTokenizer: split on whitespace (dropped) and on each punctuation character (kept). */
  function preTokenize(text) {
    const words = [];
    let word = "";
    for (const ch of text) {
      if (WHITESPACE.test(ch)) { if (word) words.push(word); word = ""; }
      else if (PUNCTUATION.test(ch)) { if (word) words.push(word); words.push(ch); word = ""; }
      else word += ch;
    }
    if (word) words.push(word);
    return words;
  }

  class Tokenizer {
    constructor(spec) {
      this.vocab = new Map(spec.vocab.map((piece, id) => [piece, id]));
      this.pieces = spec.vocab;
      this.lowercase = spec.lowercase;
      this.unk = spec.unk_token;
      this.maxChars = spec.max_input_chars_per_word;
      this.prefix = spec.continuing_subword_prefix;
      this.specials = spec.special_tokens;
      this.cls = spec.cls_token;
      this.sep = spec.sep_token;
    }

    wordPiece(word) {
      if (Array.from(word).length > this.maxChars) return [this.unk];
      const pieces = [];
      let start = 0;
      while (start < word.length) {
        let end = word.length, found = null;
        while (start < end) {
          const piece = (start > 0 ? this.prefix : "") + word.slice(start, end);
          if (this.vocab.has(piece)) { found = piece; break; }
          end -= 1;
          // never split a surrogate pair
          if (end > start && /[\uDC00-\uDFFF]/.test(word[end])) end -= 1;
        }
        if (found === null) return [this.unk];
        pieces.push(found);
        start = end;
      }
      return pieces;
    }

    /* WordPiece ids with [CLS] and [SEP], special tokens in the text matched as they are. */
    encode(text) {
      const escaped = this.specials.map(s => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
      const parts = text.split(new RegExp("(" + escaped.join("|") + ")"));
      const pieces = [this.cls];
      for (const part of parts) {
        if (this.specials.includes(part)) { pieces.push(part); continue; }
        for (const word of preTokenize(normalize(part, this.lowercase))) pieces.push(...this.wordPiece(word));
      }
      pieces.push(this.sep);
      return pieces.map(p => this.vocab.get(p));
    }
  }

  // ------------------------------------------------------------------ the model
  // erf to double precision (W. J. Cody's rational approximations, as in many libm implementations)
  function erf(x) {
    const ax = Math.abs(x);
    if (ax < 0.5) {
      const t = x * x;
      const top = (((0.185777706184603153 * t + 3.16112374387056560) * t + 113.864154151050156) * t +
        377.485237685302021) * t + 3209.37758913846947;
      const bottom = (((t + 23.6012909523441209) * t + 244.024637934444173) * t + 1282.61652607737228) * t +
        2844.23683343917062;
      return x * top / bottom;
    }
    return x < 0 ? -1 + erfcPositive(ax) : 1 - erfcPositive(ax);
  }

  function erfcPositive(x) {
    let top, bottom;
    if (x < 4) {
      top = (((((((2.15311535474403846e-8 * x + 0.564188496988670089) * x + 8.88314979438837594) * x +
        66.1191906371416295) * x + 298.635138197400131) * x + 881.952221241769090) * x +
        1712.04761263407058) * x + 2051.07837782607147) * x + 1230.33935479799725;
      bottom = (((((((x + 15.7449261107098347) * x + 117.693950891312499) * x + 537.181101862009858) * x +
        1621.38957456669019) * x + 3290.79923573345963) * x + 4362.61909014324716) * x +
        3439.36767414372164) * x + 1230.33935480374942;
      return Math.exp(-x * x) * top / bottom;
    }
    if (x > 27) return 0;
    const z = 1 / (x * x);
    top = ((((0.0163153871373020978 * z + 0.305326634961232344) * z + 0.360344899949804439) * z +
      0.125781726111229246) * z + 0.0160837851487422766) * z + 6.58749161529837803e-4;
    bottom = ((((z + 2.56852019228982242) * z + 1.87295284992346725) * z + 0.527905102951428412) * z +
      0.0605183413124413191) * z + 0.00233520497626869185;
    return Math.exp(-x * x) / x * (1 / Math.sqrt(Math.PI) - z * top / bottom);
  }

  const gelu = x => 0.5 * x * (1 + erf(x / Math.SQRT2));

  /* rows x (out, in) weight, as nn.Linear: out[r][o] = bias[o] + sum_i x[r][i] w[o][i] */
  function linear(x, rows, inputs, weight, bias, outputs) {
    const out = new Float32Array(rows * outputs);
    for (let r = 0; r < rows; r++) {
      const xr = r * inputs;
      for (let o = 0; o < outputs; o++) {
        const wo = o * inputs;
        let sum = 0;
        for (let i = 0; i < inputs; i++) sum += x[xr + i] * weight[wo + i];
        out[r * outputs + o] = sum + bias[o];
      }
    }
    return out;
  }

  function layerNorm(x, rows, width, gamma, beta, eps) {
    const out = new Float32Array(rows * width);
    for (let r = 0; r < rows; r++) {
      let mean = 0, variance = 0;
      for (let i = 0; i < width; i++) mean += x[r * width + i];
      mean /= width;
      for (let i = 0; i < width; i++) { const d = x[r * width + i] - mean; variance += d * d; }
      const scale = 1 / Math.sqrt(variance / width + eps);
      for (let i = 0; i < width; i++) out[r * width + i] = (x[r * width + i] - mean) * scale * gamma[i] + beta[i];
    }
    return out;
  }

  class Model {
    constructor(manifest, buffer) {
      this.config = manifest.config;
      this.w = tensors(manifest, buffer);
      this.tokenizer = new Tokenizer(manifest.tokenizer);
      this.compact = new Map(manifest.compact_ids.map((original, compact) => [original, compact]));
      this.originals = manifest.compact_ids;
      this.unk = manifest.compact_unk;
      this.maskId = this.compact.get(this.tokenizer.vocab.get(manifest.tokenizer.mask_token));
    }

    /* Hidden states after the last layer, (pieces x hidden), for compact ids. */
    encode(ids) {
      const c = this.config, w = this.w, n = ids.length, H = c.hidden, eps = c.layer_norm_eps;
      let x = new Float32Array(n * H);
      const word = w["bert.embeddings.word_embeddings.weight"], position = w["bert.embeddings.position_embeddings.weight"];
      const type = w["bert.embeddings.token_type_embeddings.weight"];
      for (let t = 0; t < n; t++) {
        for (let i = 0; i < H; i++) x[t * H + i] = word[ids[t] * H + i] + position[t * H + i] + type[i];
      }
      x = layerNorm(x, n, H, w["bert.embeddings.LayerNorm.weight"], w["bert.embeddings.LayerNorm.bias"], eps);
      const heads = c.heads, d = H / heads, scale = 1 / Math.sqrt(d);
      for (let l = 0; l < c.layers; l++) {
        const p = `bert.encoder.layer.${l}.`;
        const q = linear(x, n, H, w[p + "attention.self.query.weight"], w[p + "attention.self.query.bias"], H);
        const k = linear(x, n, H, w[p + "attention.self.key.weight"], w[p + "attention.self.key.bias"], H);
        const v = linear(x, n, H, w[p + "attention.self.value.weight"], w[p + "attention.self.value.bias"], H);
        const context = new Float32Array(n * H), scores = new Float64Array(n);
        for (let h = 0; h < heads; h++) {
          for (let i = 0; i < n; i++) {
            let top = -Infinity;
            for (let j = 0; j < n; j++) {
              let s = 0;
              for (let e = 0; e < d; e++) s += q[i * H + h * d + e] * k[j * H + h * d + e];
              scores[j] = s * scale;
              if (scores[j] > top) top = scores[j];
            }
            let total = 0;
            for (let j = 0; j < n; j++) { scores[j] = Math.exp(scores[j] - top); total += scores[j]; }
            for (let e = 0; e < d; e++) {
              let s = 0;
              for (let j = 0; j < n; j++) s += scores[j] * v[j * H + h * d + e];
              context[i * H + h * d + e] = s / total;
            }
          }
        }
        const attended = linear(context, n, H, w[p + "attention.output.dense.weight"],
          w[p + "attention.output.dense.bias"], H);
        for (let i = 0; i < n * H; i++) attended[i] += x[i];
        x = layerNorm(attended, n, H, w[p + "attention.output.LayerNorm.weight"],
          w[p + "attention.output.LayerNorm.bias"], eps);
        const inner = linear(x, n, H, w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"],
          c.intermediate);
        for (let i = 0; i < inner.length; i++) inner[i] = gelu(inner[i]);
        const out = linear(inner, n, c.intermediate, w[p + "output.dense.weight"], w[p + "output.dense.bias"], H);
        for (let i = 0; i < n * H; i++) out[i] += x[i];
        x = layerNorm(out, n, H, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps);
      }
      return x;
    }

    /* Probabilities over the compact vocabulary at one position's hidden state. */
    probabilities(hidden) {
      const c = this.config, w = this.w, H = c.hidden, V = c.vocab_size, p = "cls.predictions.";
      const t = linear(hidden, 1, H, w[p + "transform.dense.weight"], w[p + "transform.dense.bias"], H);
      for (let i = 0; i < H; i++) t[i] = gelu(t[i]);
      const normed = layerNorm(t, 1, H, w[p + "transform.LayerNorm.weight"], w[p + "transform.LayerNorm.bias"],
        c.layer_norm_eps);
      const logits = linear(normed, 1, H, w["bert.embeddings.word_embeddings.weight"], w[p + "bias"], V);
      let top = -Infinity, total = 0;
      for (let i = 0; i < V; i++) if (logits[i] > top) top = logits[i];
      const probs = new Float64Array(V);
      for (let i = 0; i < V; i++) { probs[i] = Math.exp(logits[i] - top); total += probs[i]; }
      for (let i = 0; i < V; i++) probs[i] /= total;
      return probs;
    }

    /* As bertfamily.fill.guess: for each [MASK], the k most probable pieces [[piece, probability], ...]. */
    guess(text, k = 5) {
      if (typeof text !== "string" || !text.includes("[MASK]")) {
        throw new Error(`write a sentence with at least one [MASK] in it, got '${text}'`);
      }
      const original = this.tokenizer.encode(text);
      if (original.length > this.config.max_positions) {
        throw new Error(`the text has ${original.length} pieces with [CLS] and [SEP]; ` +
          `this model reads at most ${this.config.max_positions}`);
      }
      const ids = original.map(id => (this.compact.has(id) ? this.compact.get(id) : this.unk));
      const hidden = this.encode(ids), H = this.config.hidden, answers = [];
      ids.forEach((id, position) => {
        if (id !== this.maskId) return;
        const probs = this.probabilities(hidden.subarray(position * H, (position + 1) * H));
        const order = Array.from(probs.keys()).sort((a, b) => probs[b] - probs[a] || a - b).slice(0, k);
        answers.push(order.map(i => [this.tokenizer.pieces[this.originals[i]], probs[i]]));
      });
      return answers;
    }
  }

  const core = { Model, Tokenizer, normalize, preTokenize, erf, halfTable };

  // ------------------------------------------------------------------ the page
  function pageSetup(document, window) {
    const cell = document.querySelector(".cell.tag_browser-fill");
    const settings = window.BERTFAMILY_MODEL;
    if (!cell || !settings) return;
    const scripts = document.querySelectorAll("script[src]");
    const self = Array.from(scripts).find(s => /fillmask\.js(\?|$)/.test(s.src));
    const folder = new URL(settings.folder, self ? self.src : document.baseURI).href;
    const mib = (settings.bytes / 2 ** 20).toFixed(1);

    const form = document.createElement("form");
    form.className = "bf-fill";
    form.innerHTML =
      '<label for="bf-fill-input">Your sentence, with [MASK] for each blank</label>' +
      '<div class="bf-fill-row"><input id="bf-fill-input" type="text" autocomplete="off" spellcheck="false" ' +
      'aria-describedby="bf-fill-note">' +
      '<button type="submit">Fill the blanks</button></div>' +
      '<p id="bf-fill-note" class="bf-fill-note"></p>' +
      '<output for="bf-fill-input" aria-live="polite" class="bf-fill-output"></output>';
    const input = form.querySelector("input"), output = form.querySelector("output");
    form.querySelector(".bf-fill-note").textContent =
      `Runs in your browser: the first time you ask, the course model (${settings.parameters} parameters, ` +
      `float16) and its vocabulary, ${mib} MiB, download from this site, once; a plain-JavaScript ` +
      "forward pass then computes the five guesses here. Nothing you type leaves the page.";
    input.value = defaultSentence(document, cell) || settings.example || "";

    let model = null;
    const timings = { requested: null, loaded: null, guesses: [] };
    async function load() {
      if (model) return model;
      output.textContent = `Downloading the course model (${mib} MiB)…`;
      timings.requested = window.performance.now();
      const [manifest, buffer] = await Promise.all([
        fetch(folder + settings.manifest).then(r => { if (!r.ok) throw new Error(r.statusText); return r.json(); }),
        fetch(folder + settings.weights).then(r => { if (!r.ok) throw new Error(r.statusText); return r.arrayBuffer(); }),
      ]);
      model = new Model(manifest, buffer);
      timings.loaded = window.performance.now();
      return model;
    }
    form.addEventListener("submit", async event => {
      event.preventDefault();
      const started = window.performance.now(), text = input.value;
      let problem = null;
      form.setAttribute("aria-busy", "true");
      try {
        const answers = (await load()).guess(text);
        output.replaceChildren(...answers.map(guesses => {
          const line = document.createElement("div");
          line.className = "bf-fill-guesses";
          line.textContent = guesses.map(([piece, p]) => `${piece} ${Math.round(100 * p)}%`).join(" · ");
          line.dataset.guesses = JSON.stringify(guesses);
          return line;
        }));
      } catch (error) {
        problem = model ? error.message : `The model could not be loaded: ${error.message}` +
          (window.location.protocol === "file:" ? " (browsers do not fetch files for a page opened from disk: " +
            "serve the site, e.g. make serve)" : "");
        output.textContent = problem;
      } finally {
        form.removeAttribute("aria-busy");
        timings.guesses.push({ text, started, shown: window.performance.now(), error: problem });
      }
    });
    for (const widget of cell.querySelectorAll(".cell_output")) widget.hidden = true;
    cell.appendChild(form);
    window.bertfamilyFill = { load, timings, guess: async text => (await load()).guess(text) };
  }

  /* The sentence the notebook's text box starts with, from the widgets' saved state on the page. */
  function defaultSentence(document, cell) {
    try {
      const view = cell.querySelector('script[type="application/vnd.jupyter.widget-view+json"]');
      const state = document.querySelector('script[type="application/vnd.jupyter.widget-state+json"]');
      if (!view || !state) return null;
      const models = JSON.parse(state.textContent).state, seen = new Set();
      const queue = [JSON.parse(view.textContent).model_id];
      while (queue.length) {
        const id = queue.shift();
        if (seen.has(id) || !models[id]) continue;
        seen.add(id);
        const s = models[id].state;
        if (models[id].model_name === "TextModel" && typeof s.value === "string") return s.value;
        for (const child of s.children || []) queue.push(String(child).replace(/^IPY_MODEL_/, ""));
      }
    } catch (error) { /* no saved state: the example from the site's settings */ }
    return null;
  }

  if (typeof module !== "undefined" && module.exports) module.exports = core;
  if (typeof document !== "undefined") {
    root.bertfamilyFillCore = core;
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", () => pageSetup(document, root));
    else pageSetup(document, root);
  }
})(typeof window !== "undefined" ? window : globalThis);
