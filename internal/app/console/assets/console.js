// shardid console: a little plain JavaScript. Pages are rendered by the
// server; this refreshes their live parts, opens a shard's details,
// streams verify, and asks for the token and confirmation of actions.
"use strict";
(function () {
  const refresh = Number(document.body.dataset.refresh) || 2000;

  // Live parts: data-live="/part/..." is fetched again every
  // data-every ms (default: the console's refresh) and replaced. A dead
  // console must not look live: the footer says when the page last
  // refreshed, and a banner says "not refreshed since" when a refresh
  // fails or none has succeeded for three periods.
  const stale = document.getElementById("stale");
  const refreshed = document.getElementById("refreshed");
  let lastOK = refreshed ? Number(refreshed.dataset.at) || Date.now() : Date.now();
  let lastError = "";
  const clock = (ms) => new Date(ms).toISOString().slice(11, 19) + " UTC";
  function showStale() {
    if (!stale) return;
    stale.textContent = "Not refreshed since " + clock(lastOK) + (lastError ? ": " + lastError : "") + ". What this page shows may be out of date.";
    stale.hidden = false;
  }
  async function reload(el) {
    try {
      const url = el.dataset.live;
      const r = await fetch(url, { cache: "no-store" });
      if (!r.ok) throw new Error("the console answered " + r.status);
      const html = await r.text();
      if (el.dataset.live !== url) return; // the filter changed meanwhile: a newer read follows
      if (html !== el.dataset.last) {
        el.innerHTML = html;
        el.dataset.last = html;
      }
      lastOK = Date.now();
      lastError = "";
      el.dataset.updated = String(lastOK);
      delete el.dataset.error;
      if (stale) stale.hidden = true;
      if (refreshed) refreshed.textContent = "Refreshed " + clock(lastOK);
    } catch (e) {
      lastError = e instanceof TypeError ? "the console does not answer" : String(e.message || e);
      el.dataset.error = lastError;
      showStale();
    }
  }
  const lives = document.querySelectorAll("[data-live]");
  if (lives.length > 0) {
    const every = Math.max(...Array.from(lives, (el) => Number(el.dataset.every) || refresh));
    setInterval(() => {
      if (!document.hidden && Date.now() - lastOK > 3 * every) showStale();
    }, every);
  }
  lives.forEach((el) => {
    const every = Number(el.dataset.every) || refresh;
    if (el.id === "service") reload(el);
    let busy = false;
    setInterval(async () => {
      if (busy || document.hidden) return;
      busy = true;
      await reload(el);
      busy = false;
    }, every);
  });
  // data-load="/part/...": fetched once, after the page is shown.
  document.querySelectorAll("[data-load]").forEach(async (el) => {
    try {
      const r = await fetch(el.dataset.load, { cache: "no-store" });
      el.innerHTML = await r.text();
    } catch (e) {
      el.textContent = "could not read: " + e;
    }
  });

  // The map's filter: the map part is read again with the filter as the
  // operator types (no reload; the URL keeps it), and its refreshes keep
  // it. Without JavaScript the form's GET does the same.
  const filterForm = document.getElementById("filter-form");
  const mapEl = document.getElementById("map");
  if (filterForm && mapEl) {
    let timer = 0;
    const apply = () => {
      const q = new URLSearchParams();
      const shards = document.getElementById("filter-shards").value.trim();
      const st = document.getElementById("filter-state").value;
      if (shards) q.set("shards", shards);
      if (st) q.set("state", st);
      const qs = q.toString();
      mapEl.dataset.live = "/part/map" + (qs ? "?" + qs : "");
      history.replaceState(null, "", "/" + (qs ? "?" + qs : ""));
      reload(mapEl);
    };
    const soon = () => {
      clearTimeout(timer);
      timer = setTimeout(apply, 250);
    };
    filterForm.addEventListener("input", soon);
    filterForm.addEventListener("change", soon);
    filterForm.addEventListener("submit", (ev) => {
      ev.preventDefault();
      apply();
    });
    filterForm.addEventListener("reset", () => setTimeout(apply, 0));
  }

  // The map: a click on a strip shows the shard under the pointer.
  const detail = document.getElementById("shard-detail");
  async function showShard(n) {
    if (!detail) return;
    detail.innerHTML = "<p class=muted>Reading shard " + Number(n) + "…</p>";
    const r = await fetch("/part/shard/" + encodeURIComponent(n), { cache: "no-store" });
    detail.innerHTML = await r.text();
  }
  document.addEventListener("click", (ev) => {
    const strip = ev.target.closest && ev.target.closest(".strip");
    if (!strip) return;
    const run = ev.target.closest(".run");
    const n = Number(strip.dataset.shards);
    const box = strip.getBoundingClientRect();
    let shard = Math.min(n - 1, Math.max(0, Math.floor(((ev.clientX - box.left) / box.width) * n)));
    if (run) {
      shard = Math.min(Number(run.dataset.to), Math.max(Number(run.dataset.from), shard));
    }
    showShard(shard);
  });
  const form = document.getElementById("shard-form");
  if (form) {
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      showShard(document.getElementById("shard-input").value);
    });
  }

  // Verify: POST /api/verify streams NDJSON events.
  const log = document.getElementById("verify-log");
  const state = document.getElementById("verify-state");
  function line(text, cls) {
    const li = document.createElement("li");
    li.textContent = text;
    if (cls) li.className = cls;
    log.appendChild(li);
  }
  async function runVerify(deep, buttons) {
    buttons.forEach((b) => (b.disabled = true));
    log.textContent = "";
    state.textContent = "verify" + (deep ? " --deep" : "") + " running…";
    try {
      const r = await fetch("/api/verify" + (deep ? "?deep=1" : ""), { method: "POST" });
      if (!r.ok) {
        const body = await r.json().catch(() => ({}));
        state.textContent = "verify refused: " + (body.error || r.status);
        return;
      }
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n")) >= 0) {
          const ev = JSON.parse(buf.slice(0, i));
          buf = buf.slice(i + 1);
          switch (ev.event) {
            case "started": line("started" + (ev.deep ? " (deep)" : "")); break;
            case "running": state.textContent = "verify running, " + Math.round(ev.elapsed_ms / 1000) + " s…"; break;
            case "problem": line("FAIL " + ev.problem.check + (ev.problem.shard !== null ? " shard " + ev.problem.shard : "") + (ev.problem.host ? " on " + ev.problem.host : "") + ": " + ev.problem.detail, "bad"); break;
            case "note": line("NOTE " + ev.problem.check + ": " + ev.problem.detail); break;
            case "error": line("verify could not run: " + ev.error, "bad"); state.textContent = "verify failed to run"; break;
            case "done":
              line((ev.report.ok ? "verify: ok: " : "verify: " + ev.report.problems.length + " problems: ") + ev.shards + " shards on " + ev.hosts + " hosts, " + ev.checks.length + " checks, " + (ev.elapsed_ms / 1000).toFixed(2) + "s", ev.report.ok ? "ok" : "bad");
              state.textContent = ev.report.ok ? "verify: ok" : "verify: problems found";
              break;
          }
        }
      }
      const last = await fetch("/part/verify", { cache: "no-store" });
      document.getElementById("verify-last").innerHTML = await last.text();
    } catch (e) {
      state.textContent = "verify: " + e;
    } finally {
      buttons.forEach((b) => (b.disabled = false));
    }
  }
  const vb = [document.getElementById("run-verify"), document.getElementById("run-verify-deep")].filter(Boolean);
  vb.forEach((b) => b.addEventListener("click", () => runVerify(b.dataset.deep === "1", vb)));

  // Actions (only on a console started with --actions): a dialog asks
  // for the token and the action's name before anything is sent.
  const dialog = document.getElementById("action-dialog");
  if (dialog) {
    let action = "";
    const result = document.getElementById("action-result");
    document.querySelectorAll("button.action").forEach((b) =>
      b.addEventListener("click", () => {
        action = b.dataset.action;
        document.getElementById("action-name").textContent = action;
        document.getElementById("abort-shards-p").hidden = action !== "abort";
        document.getElementById("apply-mode-p").hidden = action !== "apply";
        document.getElementById("action-confirm").value = "";
        dialog.showModal();
      })
    );
    document.getElementById("action-cancel").addEventListener("click", () => dialog.close());
    document.getElementById("action-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const body = { confirm: document.getElementById("action-confirm").value.trim() };
      if (action === "apply") {
        body.mode = document.getElementById("action-mode").value;
      }
      if (action === "abort") {
        body.shards = document.getElementById("action-shards").value.split(/[\s,]+/).filter(Boolean).map(Number);
      }
      dialog.close();
      result.textContent = action + "…";
      const r = await fetch("/api/actions/" + action, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-Shardid-Token": document.getElementById("action-token").value },
        body: JSON.stringify(body),
      });
      const st = await r.json().catch(() => ({}));
      result.textContent = r.ok ? action + (st.finished ? " done" + (st.error ? ": " + st.error : "") : " started: the moves below follow it") : action + " refused: " + (st.error || r.status);
    });
  }
})();
