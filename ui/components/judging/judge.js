// The judging panel (Streamlit components v2): the browser holds the items and answers each key at once;
// every label goes to the server carrying an idempotency key made here: POSTed to the app's own commit
// endpoint when the server gave a token (data.endpoint: the store answers at once, no script run), else (or
// when the endpoint refuses the token) as a trigger ("ops"). Labels not yet acknowledged stay in
// localStorage (per annotator and campaign or dataset) and are resent until the server says they are saved
// (the endpoint's answer, or data.acked) or refused (data.failed); an unreachable endpoint (a restart) is
// tried again with backoff, the token still good. Nothing else is fetched: this file is the
// whole program. Texts are written with textContent only.
const INSTANCES = new WeakMap();
const RESEND_MS = 2500;
const KEYMAP = [
  ["0 / 1 / 2", "label the item and show the next one"],
  ["U", "undo your last label (this page)"],
  ["P", "previous item"],
  ["N", "next unjudged item"],
  ["J / K", "next / previous item (list mode)"],
  ["S", "can't judge, with a reason"],
  ["R", "write a rationale (Enter or Esc leaves the box)"],
  ["L", "switch item mode / list mode"],
  ["?", "this help (Esc closes it)"],
];

function newKey() {
  if (window.crypto && window.crypto.randomUUID) { return window.crypto.randomUUID(); }
  const b = new Uint8Array(16);
  window.crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

function textLike(el) {
  if (!el || !el.tagName) { return false; }
  if (el.isContentEditable || el.tagName === "TEXTAREA" || el.tagName === "SELECT") { return true; }
  return el.tagName === "INPUT" && ["radio", "checkbox", "button", "submit", "range"].indexOf(el.type) < 0;
}

function store(name, value) {
  try {
    if (value === undefined) { return JSON.parse(window.localStorage.getItem(name) || "null"); }
    window.localStorage.setItem(name, JSON.stringify(value));
  } catch (e) { /* storage full or disabled: the in-memory outbox still resends */ }
  return null;
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) { e.className = cls; }
  if (text !== undefined) { e.textContent = text; }
  return e;
}

class Judge {
  constructor(root) {
    this.root = root.querySelector(".qrs-judge");
    this.q = (sel) => this.root.querySelector(sel);
    this.items = [];
    this.index = new Map();
    this.local = new Map(); // uid -> {label, cant, rationale, key, state, msg}
    this.outbox = [];
    this.undoStack = [];
    this.cursor = null;
    this.scope = null;
    this.mode = "item";
    this.data = {};
    this.lastSent = 0;
    this.navSent = null;
    this.posting = false; // a POST to the commit endpoint is in flight
    this.endpointDown = null; // the token the endpoint refused (or failed with): the trigger until a new one
    this.synced = null;
    window.__qrsJudgeTimings = window.__qrsJudgeTimings || [];
    this.onKey = (e) => this.key(e);
    window.addEventListener("keydown", this.onKey, true); // capture: before the page's own shortcuts
    this.timer = window.setInterval(() => this.resend(false), RESEND_MS);
    this.onOnline = () => this.resend(true);
    window.addEventListener("online", this.onOnline);
    // back on the tab (a laptop woken, a tab restored): resend at once, not at the next tick
    this.onVisible = () => { if (document.visibilityState === "visible") { this.resend(true); } };
    document.addEventListener("visibilitychange", this.onVisible);
    this.cleanup = () => {
      window.removeEventListener("keydown", this.onKey, true);
      window.removeEventListener("online", this.onOnline);
      document.removeEventListener("visibilitychange", this.onVisible);
      window.clearInterval(this.timer);
      window.clearTimeout(this.retryTimer);
    };
    this.buildStatic();
  }

  buildStatic() {
    const bar = this.q(".qj-buttons");
    const button = (cls, text, aria, keys, fn) => {
      const b = el("button", cls, text);
      b.type = "button";
      b.setAttribute("aria-label", aria);
      if (keys) { b.setAttribute("aria-keyshortcuts", keys); }
      b.addEventListener("click", (e) => { e.preventDefault(); fn(); this.focus(); });
      bar.appendChild(b);
      return b;
    };
    this.labelButtons = [];
    for (let v = 0; v <= 2; v += 1) {
      const b = button("qj-label", String(v), "Label " + v, String(v), () => this.label(v, performance.now()));
      b.dataset.label = String(v);
      this.labelButtons.push(b);
    }
    this.cantButton = button("qj-cant-open", "Can't judge", "Can't judge this item", "S", () => this.openCant());
    button("qj-prev", "Previous", "Previous item", "P", () => this.move(-1));
    button("qj-next", "Next unjudged", "Next unjudged item", "N", () => this.nextUnjudged());
    button("qj-undo", "Undo", "Undo your last label", "U", () => this.undo());
    button("qj-rationale-open", "Rationale", "Write a rationale", "R", () => this.openRationale());
    this.modeButton = button("qj-mode", "List mode", "Switch between item mode and list mode", "L", () => this.toggleMode());
    button("qj-help-open", "Keys (?)", "Show the keyboard map", "?", () => this.help(true));
    const map = this.q(".qj-keymap");
    for (const [k, what] of KEYMAP) { map.appendChild(el("dt", "", k)); map.appendChild(el("dd", "", what)); }
    this.q(".qj-help-close").addEventListener("click", () => this.help(false));
    this.q(".qj-cant-save").addEventListener("click", () => this.saveCant());
    const box = this.q(".qj-rationale-box");
    box.addEventListener("keydown", (e) => {
      e.stopPropagation();
      if (e.key === "Escape" || (e.key === "Enter" && !e.shiftKey)) { e.preventDefault(); this.closeRationale(); }
    });
    const reason = this.q(".qj-cant-box");
    reason.addEventListener("keydown", (e) => {
      e.stopPropagation();
      if (e.key === "Enter") { e.preventDefault(); this.saveCant(); }
      if (e.key === "Escape") { e.preventDefault(); this.q(".qj-cant").hidden = true; this.focus(); }
    });
  }

  focus() { this.root.focus({ preventScroll: true }); }

  // ------------------------------------------------------------------ data from the server
  update(data) {
    this.data = data || {};
    if (this.data.scope !== this.scope) {
      this.scope = this.data.scope;
      this.outbox = store("qrs-judge:outbox:" + this.scope) || [];
      this.local = new Map();
      this.undoStack = [];
      this.cursor = null;
      this.mode = store("qrs-judge:mode:" + this.data.annotator) || this.data.mode || "item";
      for (const op of this.outbox) { this.remember(op, "pending"); }
    }
    this.settleAll(this.data.acked || [], this.data.failed || {});
    this.items = this.data.items || [];
    this.index = new Map(this.items.map((it, i) => [it.uid, i]));
    for (const [uid, st] of this.local) { // the server's item shows a saved label: its own view again
      if (st.state === "saved" && !this.outbox.some((op) => op.uid === uid) && this.agrees(uid, st)) {
        this.local.delete(uid);
      }
    }
    if (this.atEnd && this.index.has(this.cursor) && this.index.get(this.cursor) + 1 < this.items.length) {
      this.atEnd = false; // more items came: show the one after the last labelled
      this.cursor = this.items[this.index.get(this.cursor) + 1].uid;
    }
    if (this.cursor === null || !this.index.has(this.cursor)) {
      this.atEnd = false;
      this.cursor = this.data.start && this.index.has(this.data.start) ? this.data.start
        : (this.items.length ? this.items[0].uid : null);
      // labels resent from an earlier page (not yet known to the server) count as given: skip past them
      let i = this.cursor === null ? -1 : this.index.get(this.cursor);
      while (i >= 0 && i + 1 < this.items.length && this.local.has(this.items[i].uid) && this.judged(this.items[i])) {
        i += 1;
      }
      if (i >= 0) { this.cursor = this.items[i].uid; }
    }
    this.render();
    this.inflight = false;
    if (this.outbox.length) { this.send(); }
  }

  settleAll(ackedKeys, failed) {
    const acked = new Set(ackedKeys);
    this.outbox = this.outbox.filter((op) => {
      if (acked.has(op.key)) { this.settle(op, "saved"); return false; }
      if (failed[op.key]) { this.settle(op, "failed", failed[op.key]); return false; }
      return true;
    });
    for (const st of this.local.values()) {
      if (st.state === "pending" && acked.has(st.key)) { st.state = "saved"; }
    }
    store("qrs-judge:outbox:" + this.scope, this.outbox);
  }

  agrees(uid, st) {
    const i = this.index.get(uid);
    if (i === undefined) { return true; }
    const it = this.items[i];
    if (!it.judged) { return (st.label === null || st.label === undefined) && !st.cant; }
    return (it.cant || null) === (st.cant || null) && (!!st.cant || it.label === st.label);
  }

  remember(op, state, msg) {
    if (op.kind === "undo") {
      this.local.set(op.uid, { label: op.restore, cant: op.restoreCant, rationale: null, key: op.key, state, msg });
    } else {
      this.local.set(op.uid, { label: op.kind === "label" ? op.label : null, cant: op.kind === "cant" ? op.reason : null,
        rationale: op.rationale, key: op.key, state, msg });
    }
  }

  settle(op, state, msg) {
    const st = this.local.get(op.uid);
    if (st && st.key === op.key) { st.state = state; st.msg = msg; }
  }

  // ------------------------------------------------------------------ what an item shows
  view(it) {
    const st = this.local.get(it.uid);
    if (st && (st.state === "pending" || st.state === "failed" || st.state === "saved")) { return st; }
    return { label: it.label, cant: it.cant, rationale: it.rationale, state: it.judged ? "saved" : "none" };
  }

  judged(it) { const v = this.view(it); return v.label !== null && v.label !== undefined || !!v.cant; }

  current() {
    if (this.atEnd || this.cursor === null) { return null; }
    return this.items[this.index.get(this.cursor)] || null;
  }

  stateText(v) {
    if (v.state === "pending") { return ["unsaved (sending)", "qj-state-pending"]; }
    if (v.state === "failed") { return ["not saved: " + (v.msg || "refused"), "qj-state-failed"]; }
    if (v.state === "saved") { return ["saved", "qj-state-saved"]; }
    return ["not judged yet", ""];
  }

  labelText(v) {
    if (v.cant) { return "can't judge"; }
    if (v.label === null || v.label === undefined) { return ""; }
    const names = this.data.labels || {};
    return String(v.label) + (names[v.label] ? " · " + names[v.label] : "");
  }

  render() {
    const it = this.current();
    const enabled = !!this.data.enabled;
    const max = this.data.max_label === undefined ? 2 : this.data.max_label;
    const unsaved = this.outbox.length;
    const done = this.items.filter((x) => this.judged(x)).length;
    // how many labels wait for the server, and since when (the oldest): a stall is visible, not silent
    const since = unsaved ? Math.min(...this.outbox.map((op) => op.t || Date.now())) : 0;
    const waiting = unsaved ? " · " + unsaved + " unsaved, waiting since " + new Date(since).toLocaleTimeString() : "";
    this.q(".qj-status").textContent = (this.data.status ? this.data.status + " · " : "") + done + " of "
      + this.items.length + " shown judged" + (unsaved ? waiting : " · all saved")
      + " · " + (this.mode === "list" ? "list mode" : "item mode");
    this.root.dataset.mode = this.mode;
    this.root.dataset.unsaved = String(unsaved);
    this.modeButton.textContent = this.mode === "list" ? "Item mode" : "List mode";
    this.cantButton.hidden = !this.data.can_cant;
    const v = it ? this.view(it) : { state: "none" };
    this.labelButtons.forEach((b, i) => {
      b.hidden = i > max;
      b.disabled = !enabled || !it;
      b.setAttribute("aria-pressed", String(!!it && !v.cant && v.label === i));
      b.textContent = i + (this.data.labels && this.data.labels[i] ? " · " + this.data.labels[i] : "");
    });
    const list = this.q(".qj-list");
    const item = this.q(".qj-item");
    if (!it) {
      this.q(".qj-query").textContent = "";
      this.q(".qj-doc").textContent = this.atEnd ? "End of the items loaded here: N goes to the next unjudged one, "
        + "P back to the last." : (this.data.empty || "Nothing to judge here.");
      this.root.dataset.uid = "";
      this.q(".qj-pos").textContent = "";
      this.q(".qj-state").textContent = "";
      list.hidden = true;
      return;
    }
    this.root.dataset.uid = it.uid;
    this.q(".qj-query").textContent = it.query;
    const group = this.items.filter((x) => x.group === it.group);
    const at = group.indexOf(it);
    if (this.mode === "list") {
      item.querySelector(".qj-doc").hidden = true;
      this.q(".qj-pos").textContent = "Candidates of this query (" + group.length + ")";
      this.q(".qj-state").textContent = "";
      list.hidden = false;
      list.replaceChildren();
      group.forEach((x, i) => {
        const row = el("li", "qj-row");
        const xv = this.view(x);
        const [stext, scls] = this.stateText(xv);
        row.setAttribute("role", "option");
        row.setAttribute("aria-selected", String(x.uid === it.uid));
        row.dataset.uid = x.uid;
        row.dataset.label = this.judged(x) ? (xv.cant ? "cant" : String(xv.label)) : "";
        row.dataset.state = xv.state;
        const mark = el("span", "qj-mark " + scls, this.judged(x) ? this.labelText(xv) + " · " + stext : "·");
        row.appendChild(el("span", "qj-num", String(i + 1) + "."));
        row.appendChild(mark);
        row.appendChild(el("span", "qj-text", x.text));
        row.setAttribute("aria-label", "Candidate " + (i + 1) + ": " + (this.judged(x) ? this.labelText(xv) + ", " + stext : "not judged"));
        row.addEventListener("click", () => { this.atEnd = false; this.cursor = x.uid; this.render(); this.focus(); });
        list.appendChild(row);
      });
      const sel = list.querySelector('[aria-selected="true"]');
      if (sel && sel.scrollIntoView) { sel.scrollIntoView({ block: "nearest" }); }
    } else {
      list.hidden = true;
      item.querySelector(".qj-doc").hidden = false;
      this.q(".qj-doc").textContent = it.text;
      this.q(".qj-pos").textContent = "Candidate " + (at + 1) + " of " + group.length
        + (this.judged(it) ? " · your label: " + this.labelText(v) : "");
      const [stext, scls] = this.stateText(v);
      const state = this.q(".qj-state");
      state.textContent = "· " + stext;
      state.className = "qj-state " + scls;
    }
  }

  // ------------------------------------------------------------------ actions
  enqueue(op) {
    op.t = Date.now();
    this.outbox.push(op);
    this.remember(op, "pending");
    store("qrs-judge:outbox:" + this.scope, this.outbox);
  }

  send() {
    if (!this.outbox.length) { return; }
    const ep = this.data.endpoint || {};
    if (ep.token && this.endpointDown !== ep.token && window.fetch) { this.post(ep); return; }
    if (!this.setTrigger) { return; }
    // one request in flight: labels given meanwhile go with the next one, sent as soon as the answer comes
    // (or after RESEND_MS without one), so the server never queues reruns that only repeat each other
    if (this.inflight && performance.now() - this.lastSent < RESEND_MS) { return; }
    this.inflight = true;
    this.lastSent = performance.now();
    this.setTrigger("ops", { ops: this.outbox.slice(0, 200), sent: Date.now() });
  }

  post(ep) {
    if (this.posting && performance.now() - this.lastSent < RESEND_MS) { return; }
    this.posting = true;
    this.lastSent = performance.now();
    const headers = { "Content-Type": "application/json" };
    headers[ep.header] = ep.token;
    window.fetch(ep.url, { method: "POST", headers, body: JSON.stringify({ ops: this.outbox.slice(0, 200) }),
      credentials: "same-origin", cache: "no-store" })
      .then((r) => {
        if (r.ok) { return r.json(); }
        const err = new Error("HTTP " + r.status);
        err.status = r.status;
        throw err;
      })
      .then((answer) => {
        this.posting = false;
        this.retryMs = 0;
        const acked = answer.acked || [];
        this.settleAll(acked, answer.failed || {});
        this.render();
        this.sync();
        if (acked.length && this.outbox.length) { this.send(); } // labels given meanwhile; a busy store waits
      })
      .catch((err) => {
        this.posting = false;
        if (err && err.status && err.status < 500) { // refused: the trigger carries the labels until a new token
          this.endpointDown = ep.token;
          this.send();
          return;
        }
        // unreachable (the server restarting) or failing: try again soon with the same token (it outlives a
        // restart), backing off from 250 ms to RESEND_MS, so labels go as soon as the server is back
        this.retryMs = Math.min(RESEND_MS, (this.retryMs || 125) * 2);
        window.clearTimeout(this.retryTimer);
        this.retryTimer = window.setTimeout(() => this.resend(true), this.retryMs);
      });
  }

  sync() {
    // the page refreshes (progress, an open campaign's next query) only in a script run: near the end of the
    // items loaded here, ask for one each time fewer are left, once what was given is stored (so the run shows it)
    const ep = this.data.endpoint || {};
    if (!this.setTrigger || this.data.navigable || this.outbox.length) { return; }
    const i = this.index.get(this.cursor);
    const ahead = this.atEnd || i === undefined ? 0 : this.items.slice(i).filter((x) => !this.judged(x)).length;
    const mark = ep.token + "|" + ahead;
    if (ahead > 3 || this.synced === mark) { return; }
    this.synced = mark;
    this.inflight = true;
    this.setTrigger("ops", { ops: [], sent: Date.now() });
  }

  resend(force) {
    if (force) { this.inflight = false; }
    if (this.outbox.length && (force || performance.now() - this.lastSent > RESEND_MS)) { this.send(); }
  }

  label(value, t0) {
    const it = this.current();
    const max = this.data.max_label === undefined ? 2 : this.data.max_label;
    if (!it || !this.data.enabled || value > max) { return; }
    const before = this.view(it);
    const op = { key: newKey(), kind: "label", uid: it.uid, item: it.id, group: it.group, label: value,
      rationale: this.draft(it) };
    this.undoStack.push({ uid: it.uid, label: before.label === undefined ? null : before.label, cant: before.cant || null });
    this.enqueue(op);
    this.step(+1);
    this.render();
    const painted = this.cursor;
    window.requestAnimationFrame(() => {
      const now = performance.now();
      window.__qrsJudgeTimings.push({ key: op.key, value, ms: now - t0, shown: painted,
        pressed: Date.now() - (now - t0) });
    });
    this.send();
  }

  draft(it) {
    const st = this.local.get(it.uid);
    if (st && st.draft !== undefined) { return st.draft; }
    const v = this.view(it);
    return v.rationale || null;
  }

  undo() {
    const last = this.undoStack.pop();
    if (!last || !this.index.has(last.uid)) { return; }
    const it = this.items[this.index.get(last.uid)];
    this.enqueue({ key: newKey(), kind: "undo", uid: it.uid, item: it.id, group: it.group, restore: last.label,
      restoreCant: last.cant });
    this.atEnd = false;
    this.cursor = it.uid;
    this.render();
    this.send();
  }

  step(dir) {
    const i = this.index.get(this.cursor);
    if (i === undefined) { return; }
    if (this.atEnd && dir < 0) { this.atEnd = false; return; } // back from past the end: the last item
    const j = i + dir;
    if (j >= 0 && j < this.items.length) {
      this.cursor = this.items[j].uid;
      this.nav();
    } else if (this.data.more && (dir > 0 ? this.data.more.next : this.data.more.prev)) {
      this.nav(dir);
    }
    if (j >= this.items.length) { this.atEnd = true; } // past the last item: a key never labels it again
  }

  move(dir) { this.step(dir); this.render(); }

  nextUnjudged() {
    const i = this.index.get(this.cursor) || 0;
    for (let k = 1; k <= this.items.length; k += 1) {
      const it = this.items[(i + k) % this.items.length];
      if (!this.judged(it)) { this.atEnd = false; this.cursor = it.uid; this.nav(); this.render(); return; }
    }
    if (this.data.more && this.data.more.next) { this.nav(+1); }
  }

  nav(dir) {
    // free judging holds the current query and the next one; entering another query (or going past the
    // loaded ones) asks the server to move its window
    const it = this.current();
    const want = dir ? { dir, from: it ? it.group : null } : (it && it.group !== this.data.group ? { group: it.group } : null);
    if (!want || !this.data.navigable) { return; }
    const sig = JSON.stringify(want) + "|" + this.data.window;
    if (sig === this.navSent) { return; }
    this.navSent = sig;
    if (this.setTrigger) { this.setTrigger("nav", want); }
  }

  openRationale() {
    const it = this.current();
    if (!it) { return; }
    const box = this.q(".qj-rationale-box");
    this.q(".qj-rationale").hidden = false;
    box.value = this.draft(it) || "";
    box.dataset.uid = it.uid;
    box.focus();
  }

  closeRationale() {
    const box = this.q(".qj-rationale-box");
    const uid = box.dataset.uid;
    this.q(".qj-rationale").hidden = true;
    this.focus();
    if (!uid || !this.index.has(uid)) { return; }
    const it = this.items[this.index.get(uid)];
    const v = this.view(it);
    const text = box.value.trim() || null;
    if (text === (v.rationale || null)) { return; }
    if (this.judged(it) && !v.cant) { // an item already labelled: the rationale goes with its label again
      this.enqueue({ key: newKey(), kind: "label", uid: it.uid, item: it.id, group: it.group, label: v.label, rationale: text });
      this.render();
      this.send();
    } else {
      const st = this.local.get(uid) || { label: null, cant: null, rationale: null, state: "none" };
      st.draft = text;
      this.local.set(uid, st);
    }
  }

  openCant() {
    if (!this.data.can_cant || !this.current() || !this.data.enabled) { return; }
    this.q(".qj-cant").hidden = false;
    const box = this.q(".qj-cant-box");
    box.value = "";
    box.focus();
  }

  saveCant() {
    const it = this.current();
    const reason = this.q(".qj-cant-box").value.trim();
    if (!it) { return; }
    if (!reason) { this.q(".qj-message").textContent = "Say why the item cannot be judged (a reason is required)."; return; }
    this.q(".qj-message").textContent = "";
    this.q(".qj-cant").hidden = true;
    const before = this.view(it);
    this.undoStack.push({ uid: it.uid, label: before.label === undefined ? null : before.label, cant: before.cant || null });
    this.enqueue({ key: newKey(), kind: "cant", uid: it.uid, item: it.id, group: it.group, reason, rationale: this.draft(it) });
    this.step(+1);
    this.render();
    this.focus();
    this.send();
  }

  toggleMode() {
    this.mode = this.mode === "list" ? "item" : "list";
    store("qrs-judge:mode:" + this.data.annotator, this.mode);
    this.render();
  }

  help(show) {
    this.q(".qj-help").hidden = !show;
    if (show) { this.q(".qj-help-close").focus(); } else { this.focus(); }
  }

  key(e) {
    if (window.__qrsJudgeActive !== this || !this.root.isConnected) { return; }
    if (e.ctrlKey || e.metaKey || e.altKey || e.isComposing) { return; }
    if (textLike(e.target)) { return; } // a text box (ours or the page's): the key is text, never a label
    const k = e.key;
    const helpOpen = !this.q(".qj-help").hidden;
    if (helpOpen) {
      if (k === "Escape" || k === "?") { e.preventDefault(); e.stopImmediatePropagation(); this.help(false); }
      return;
    }
    const t0 = performance.now();
    let handled = true;
    if (k === "0" || k === "1" || k === "2") { this.label(Number(k), t0); }
    else if (k === "u" || k === "U") { this.undo(); }
    else if (k === "p" || k === "P") { this.move(-1); }
    else if (k === "n" || k === "N") { this.nextUnjudged(); }
    else if (k === "j" || k === "J") { this.move(+1); }
    else if (k === "k" || k === "K") { this.move(-1); }
    else if (k === "s" || k === "S") { this.openCant(); }
    else if (k === "r" || k === "R") { this.openRationale(); }
    else if (k === "l" || k === "L") { this.toggleMode(); }
    else if (k === "?") { this.help(true); }
    else { handled = false; }
    if (handled) { e.preventDefault(); e.stopImmediatePropagation(); }
  }
}

export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  let judge = INSTANCES.get(parentElement);
  if (!judge) {
    judge = new Judge(parentElement);
    INSTANCES.set(parentElement, judge);
  }
  judge.setTrigger = setTriggerValue;
  window.__qrsJudgeActive = judge;
  judge.update(data);
  return judge.cleanup;
}
