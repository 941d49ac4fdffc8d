// framefarm's dashboard: screens over the public API and its event stream. No framework, no
// build step: the DOM is built with textContent (never innerHTML), so nothing a job carries can
// run in the page.

const TOKEN_KEY = "framefarm.token";
const main = document.getElementById("main");

// ---- the API ----

let token = localStorage.getItem(TOKEN_KEY) || "";
let me = null; // {kind: "team", name, role} or {kind: "admin"}

// mayAct says whether the token may change anything: a viewer's reads only, so the page shows it
// no button it would be refused.
const mayAct = () => me && (me.kind === "admin" || me.role !== "viewer");

// jobsAPI is where the jobs are read and acted on: a team's own, or every team's for the admin.
const jobsAPI = () => (me && me.kind === "admin" ? "/api/v2/admin/jobs" : "/api/v2/jobs");

class APIError extends Error {
  constructor(status, body) {
    super((body && body.error) || `HTTP ${status}`);
    this.status = status;
  }
}

async function api(method, path, body, extraHeaders = {}) {
  const headers = { ...extraHeaders, Authorization: `Bearer ${token}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (!resp.ok) throw new APIError(resp.status, data);
  return data;
}

// currentTokenID names the page's own token as token lists do: the first 8 bytes of its SHA-256,
// in hex ("" where the browser computes no digest, off a secure origin).
let currentTokenID = "";
async function tokenIDOf(tok) {
  if (!crypto.subtle) return "";
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(tok)));
  return [...digest.slice(0, 8)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

// ---- small DOM helpers ----

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function toast(message) {
  const t = document.getElementById("toast");
  t.textContent = message;
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 5000);
}

// statusClass maps an API status to a badge colour.
function statusClass(status) {
  switch (status) {
    case "render:dorender": return "rendering";
    case "manually_cancelled": return "cancelled";
    default: return status;
  }
}

function statusText(status) {
  return { "render:dorender": "rendering", "manually_cancelled": "cancelled" }[status] || status;
}

function badge(status) { return h("span", { class: `badge ${statusClass(status)}`, "data-status": status }, statusText(status)); }

function progressBar(status, progress) {
  const p = Math.max(0, Math.min(100, progress || 0));
  const fill = h("span");
  fill.style.width = `${p}%`; // through the CSSOM: the page's CSP allows no inline style attributes
  return h("div", { class: `progress ${statusClass(status)}`, role: "progressbar", "aria-valuenow": String(Math.round(p)), "aria-valuemin": "0", "aria-valuemax": "100" }, fill);
}

// chunksPanel shows a split job's chunks as one bar, a segment per chunk as wide as its frames,
// coloured by its state, its node named in it and marked by the node's colour below; a rendering
// chunk fills as it progresses.
function chunksPanel(chunks) {
  if (!chunks || !chunks.length) return null;
  const nodes = [...new Set(chunks.map((c) => c.node).filter(Boolean))].sort();
  // Hues from blue on, spread evenly: red would read as a failure.
  const hue = (node) => Math.round(210 + (360 * nodes.indexOf(node)) / Math.max(nodes.length, 1)) % 360;
  const framesOf = (c) => c.frames[1] - c.frames[0] + 1;
  const bar = h("div", { class: "chunks", role: "list", "aria-label": "chunks" }, ...chunks.map((c) => {
    const fill = h("span", { class: "fill" });
    fill.style.width = `${c.status === "finished" ? 100 : Math.max(0, Math.min(100, c.progress || 0))}%`;
    const seg = h("div", {
      class: `chunk ${statusClass(c.status)}`, role: "listitem",
      title: `chunk ${c.index + 1}: frames ${c.frames[0]} to ${c.frames[1]}, ${statusText(c.status)}${c.node ? ` on ${c.node}` : ""}` +
        `${c.attempts > 1 ? `, attempt ${c.attempts}` : ""}${c.status === "render:dorender" ? `, ${Math.round(c.progress || 0)}%` : ""}${c.error ? `: ${c.error}` : ""}`,
    }, fill, h("span", { class: "node" }, c.node || ""));
    seg.style.flexGrow = String(framesOf(c)); // through the CSSOM, as the page's CSP asks
    if (c.node) seg.style.borderBottomColor = `hsl(${hue(c.node)} 65% 45%)`;
    return seg;
  }));
  const legend = h("p", { class: "legend" }, ...nodes.map((node) => {
    const dot = h("span", { class: "dot" });
    dot.style.background = `hsl(${hue(node)} 65% 45%)`;
    const frames = chunks.filter((c) => c.node === node && c.status === "finished").reduce((n, c) => n + framesOf(c), 0);
    return h("span", {}, dot, ` ${node}: ${frames} frames rendered`);
  }));
  const done = chunks.filter((c) => c.status === "finished").length;
  return h("section", { class: "panel" }, h("h2", {}, `Chunks (${done} of ${chunks.length} rendered)`), bar, legend);
}

function age(iso) {
  if (!iso) return "";
  const s = Math.max(0, (Date.now() - new Date(iso).getTime()) / 1000);
  if (s < 60) return `${Math.round(s)}s ago`;
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  if (s < 86400) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86400)}d ago`;
}

function when(iso) { return iso ? new Date(iso).toLocaleString() : "—"; }

// ---- the event stream: fetch, not EventSource, so the token goes in a header, never a URL ----

const listeners = new Set();
let streamState = "off";
let streamAbort = null;

// runEvents keeps one stream open while the page is visible. A browser opens few connections to
// one server (six over HTTP/1.1): a hidden or departing page closes its stream at once, and
// reopens it when shown again, and the screen then reads what it shows again.
async function runEvents() {
  if (!me || streamState !== "off" || document.hidden) return;
  streamState = "connecting";
  // A team's stream carries its jobs and templates; the admin's, the farm's render nodes.
  const path = me.kind === "team" ? "/api/v2/events" : "/api/v2/admin/events";
  let first = true;
  while (me && !document.hidden) {
    streamAbort = new AbortController();
    try {
      const resp = await fetch(path, { headers: { Authorization: `Bearer ${token}` }, signal: streamAbort.signal });
      if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
      streamState = "on";
      liveChanged();
      // What changed while there was no stream is read again.
      if (!first) for (const fn of listeners) fn({ type: "refresh" });
      first = false;
      const reader = resp.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = frame.split("\n").find((l) => l.startsWith("data: "));
          if (data) {
            const ev = JSON.parse(data.slice(6));
            for (const fn of listeners) fn(ev);
          }
        }
      }
    } catch { /* closed, dropped or refused: reconnect below while visible */ }
    first = false;
    streamState = "connecting";
    liveChanged();
    if (document.hidden) break;
    await new Promise((r) => setTimeout(r, 2000));
  }
  streamState = "off";
  liveChanged();
}

function closeEvents() { if (streamAbort) streamAbort.abort(); }

window.addEventListener("pagehide", closeEvents);
document.addEventListener("visibilitychange", () => (document.hidden ? closeEvents() : runEvents()));

function liveChanged() {
  for (const el of document.querySelectorAll(".live")) el.classList.toggle("on", streamState === "on");
}

function liveBadge() {
  const el = h("span", { class: "live", title: "changes arrive as they happen" }, "live");
  el.classList.toggle("on", streamState === "on");
  return el;
}

function onEvents(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

// ---- sign in ----

async function signIn(candidate) {
  token = candidate.trim();
  try {
    const team = await api("GET", "/api/v2/team");
    me = { kind: "team", name: team.name, role: team.role || "submitter" };
  } catch (e) {
    if (e.status !== 401 && e.status !== 403) throw e;
    try {
      await api("GET", "/api/v2/nodes");
      me = { kind: "admin" };
    } catch {
      token = "";
      me = null;
      localStorage.removeItem(TOKEN_KEY);
      throw new Error("this token is not accepted");
    }
  }
  localStorage.setItem(TOKEN_KEY, token);
  currentTokenID = await tokenIDOf(token);
  document.getElementById("who").textContent = me.kind === "team" ? `team ${me.name}${me.role === "submitter" ? "" : ` (${me.role})`}` : "farm admin";
  document.getElementById("nav").hidden = false;
  // The admin's token reads no team's templates or library: those screens are a team's; the
  // teams' policies and usage are the admin's.
  for (const screen of ["batches", "templates", "library"]) document.querySelector(`nav a[data-screen="${screen}"]`).hidden = me.kind === "admin";
  document.querySelector(`nav a[data-screen="teams"]`).hidden = me.kind !== "admin";
  document.getElementById("signout").hidden = false;
  runEvents();
}

function signOut() {
  localStorage.removeItem(TOKEN_KEY);
  token = "";
  me = null;
  location.assign("/ui/");
}

function signInScreen(error) {
  const input = h("input", { type: "password", id: "token", autocomplete: "off", placeholder: "ff_…", "aria-label": "API token" });
  const form = h("form", {
    class: "panel signin",
    onsubmit: async (e) => {
      e.preventDefault();
      try {
        await signIn(input.value);
        navigate(me.kind === "admin" ? "/ui/farm" : "/ui/jobs");
      } catch (err) {
        render(signInScreen(err.message));
      }
    },
  },
  h("h1", {}, "Sign in"),
  h("label", { for: "token" }, "API token"),
  input,
  error ? h("p", { class: "muted", role: "alert" }, error) : null,
  h("button", { type: "submit" }, "Sign in"),
  h("p", { class: "muted" }, "A team token shows that team's work; the admin token shows the farm. ",
    "framefarm token create --team NAME prints one, and a link that signs you in."));
  setTimeout(() => input.focus());
  return form;
}

// ---- screens ----

// templateNames maps template ids to display names, read once per screen.
async function templateNames() {
  try {
    const list = await api("GET", "/api/v3/templates");
    return new Map(list.map((t) => [t.id, t.displayName]));
  } catch { return new Map(); }
}

// templateLink links a template by its name; the admin, who sees no team's templates, gets the
// name the job view carries, without a link.
function templateLink(id, names, name) {
  if (!id) return "—";
  if (me && me.kind === "admin") return h("span", { title: id }, name || id);
  return h("a", { href: `/ui/templates/${id}`, "data-link": true, title: id }, (names && names.get(id)) || name || id);
}

// seconds says a duration: 850 ms, 12.3 s, 4 min 5 s, 2 h 3 min.
function seconds(s) {
  if (s === null || s === undefined) return "—";
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 60) return `${Math.round(s * 10) / 10} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
}

function render(...nodes) {
  main.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined && n !== false));
}

let leaveScreen = () => {};

const JOB_STATES = ["queued", "pending", "render:dorender", "finished", "error", "manually_cancelled"];

const ULID_PATTERN = /^[0-9A-HJKMNP-TV-Z]{26}$/i;

function jobsScreen() {
  // The filters live in the address, so a reload or a shared link shows the same list.
  const query = new URLSearchParams(location.search);
  const admin = me.kind === "admin";
  const selected = new Set();
  const rows = new Map();
  const states = new Set((query.get("states") || "").split(",").filter((s) => JOB_STATES.includes(s)));
  let sort = ["newest_first", "oldest_first", "priority"].includes(query.get("sort")) ? query.get("sort") : "newest_first";
  let loaded = 0;
  const pageSize = 50;
  const tbody = h("tbody");
  const count = h("span", { class: "count" });
  let names = new Map();
  const cancelButton = mayAct() ? h("button", { class: "danger", disabled: true, onclick: cancelSelected }, "Cancel selected") : null;
  const more = h("button", { class: "quiet", hidden: true, onclick: () => load(false) }, "Load more");
  // One box finds a job by its id, a template's jobs by its name, or filters by tags.
  let template = query.get("template") || "";
  const tagsInput = h("input", { type: "search", id: "job-search", placeholder: admin ? "job id, or tags (comma separated)" : "job id, template name, or tags (comma separated)",
    "aria-label": "search by job id, template name or tags", value: query.get("tags") || "", onchange: () => {
      const text = tagsInput.value.trim();
      if (ULID_PATTERN.test(text)) { navigate(`/ui/jobs/${text.toUpperCase()}`); return; }
      const named = [...names].find(([, name]) => name.toLowerCase() === text.toLowerCase());
      if (named) {
        template = named[0];
        tagsInput.value = "";
        if (!["newest_first", "oldest_first"].includes(sort)) sortSelect.value = sort = "newest_first"; // a template's jobs list in creation order
      }
      else if (text) template = "";
      load(true);
    } });
  const nameInput = h("input", { type: "search", id: "job-name", placeholder: "name starts with", "aria-label": "name starts with", value: query.get("name") || "", onchange: () => load(true) });
  // The admin narrows every team's jobs by team, engine and pool too.
  let team = query.get("team") || "";
  const teamSelect = h("select", { id: "job-team", "aria-label": "team", onchange: () => { team = teamSelect.value; load(true); } }, h("option", { value: "" }, "every team"));
  const engineInput = h("input", { type: "search", id: "job-engine", placeholder: "engine", "aria-label": "engine", size: "8", value: query.get("engine") || "", onchange: () => load(true) });
  const poolInput = h("input", { type: "search", id: "job-pool", placeholder: "pool", "aria-label": "pool", size: "8", value: query.get("pool") || "", onchange: () => load(true) });
  if (admin) {
    api("GET", "/api/v2/admin/teams").then((teams) => {
      for (const t of teams.sort((a, b) => a.name.localeCompare(b.name))) teamSelect.append(h("option", { value: t.name, selected: t.name === team }, t.name));
    }).catch((e) => toast(e.message));
  }
  const templateChip = h("span", { class: "toolbar" });
  const fromInput = h("input", { type: "datetime-local", "aria-label": "created from", title: "created from", value: query.get("from") || "", onchange: () => load(true) });
  const toInput = h("input", { type: "datetime-local", "aria-label": "created before", title: "created before", value: query.get("to") || "", onchange: () => load(true) });
  // The address, and the API's query, hold the same filters.
  const filters = () => [["tags", tagsInput.value.trim()], ["template", template], ["name", nameInput.value.trim()],
    ["team", admin ? team : ""], ["engine", admin ? engineInput.value.trim() : ""], ["pool", admin ? poolInput.value.trim() : ""]]
    .filter(([, v]) => v);

  function remember() {
    const q = new URLSearchParams();
    if (states.size) q.set("states", [...states].join(","));
    if (sort !== "newest_first") q.set("sort", sort);
    for (const [k, v] of filters()) q.set(k, v);
    if (fromInput.value) q.set("from", fromInput.value);
    if (toInput.value) q.set("to", toInput.value);
    const search = q.toString();
    history.replaceState(null, "", location.pathname + (search ? `?${search}` : ""));
  }

  // stale: a refresh that a replica may answer from its own records (a second behind at most,
  // and no one waits on it), rather than first making sure it holds every write.
  async function load(reset, stale) {
    if (reset) { if (!admin) names = await templateNames(); remember(); }
    const params = new URLSearchParams({ limit: String(pageSize), sort, minimal: "false", from: String(reset ? 0 : loaded) });
    if (stale) params.set("stale", "true");
    if (states.size) params.set("states", [...states].join(","));
    for (const [k, v] of filters()) params.set(k, v);
    templateChip.replaceChildren(...(template ? [h("span", { class: "chip", id: "template-filter" }, `template ${names.get(template) || template}`,
      h("button", { class: "quiet", "aria-label": "show every template's jobs", onclick: () => { template = ""; load(true); } }, "×"))] : []));
    for (const [name, input] of [["from_date", fromInput], ["to_date", toInput]]) {
      if (input.value) params.set(name, new Date(input.value).toISOString());
    }
    const resp = await fetch(`${jobsAPI()}?${params}`, { headers: { Authorization: `Bearer ${token}` } });
    if (!resp.ok) {
      let reason = `the jobs could not be listed (HTTP ${resp.status})`;
      try { reason = (await resp.json()).error || reason; } catch { /* not JSON */ }
      toast(reason);
      return;
    }
    const jobs = await resp.json();
    const total = Number(resp.headers.get("X-Total-Count") || jobs.length);
    if (reset) { tbody.replaceChildren(); rows.clear(); loaded = 0; }
    for (const j of jobs) {
      const row = jobRow(j);
      rows.set(j.id, row);
      tbody.append(row.tr);
    }
    loaded += jobs.length;
    count.textContent = `${total.toLocaleString()} job${total === 1 ? "" : "s"}`;
    more.hidden = loaded >= total;
    if (!rows.size) {
      tbody.append(h("tr", {}, h("td", { colspan: "11", class: "empty" }, admin ? "No team's job matches." : "No jobs yet. Jobs created through the API appear here as they come.")));
    }
  }

  function jobRow(j) {
    const waiting = (status) => ["queued", "pending"].includes(status);
    const box = h("input", { type: "checkbox", "aria-label": `select ${j.id}`, disabled: !waiting(j.status), checked: selected.has(j.id),
      onchange: (e) => { e.target.checked ? selected.add(j.id) : selected.delete(j.id); cancelButton.disabled = !selected.size; } });
    const statusCell = h("td", {}, badge(j.status));
    const progressCell = h("td", {}, progressBar(j.status, j.progress), h("span", { class: "pct" }, `${Math.round(j.progress || 0)}%`));
    const nodeCell = h("td", { class: "name mono" }, j.node || "");
    const created = j.stats && j.stats.createdAt;
    const ageCell = h("td", { class: "muted age", title: when(created) }, age(created));
    let status = j.status;
    const tr = h("tr", { "data-job": j.id },
      mayAct() ? h("td", {}, box) : null,
      h("td", { class: "id" }, h("a", { href: `/ui/jobs/${j.id}`, "data-link": true }, j.id), j.name ? h("div", { class: "job-name" }, j.name) : null),
      admin ? h("td", { class: "name", "data-team": j.team ? j.team.name : "" }, j.team ? j.team.name : "") : null,
      statusCell, progressCell,
      h("td", { class: "name" }, j.templateId ? templateLink(j.templateId, names, j.templateName) : (j.kind === "join" ? "join" : "—"),
        j.composition ? h("div", { class: "muted" }, j.composition) : null),
      h("td", { class: "num" }, String(j.priority || 0)),
      h("td", { class: "name muted" }, (j.tags || []).join(", "), j.pool ? h("div", {}, `pool ${j.pool}`) : null),
      nodeCell, ageCell);
    return {
      tr,
      tick() { ageCell.textContent = age(created); },
      update(ev) {
        if (ev.status && ev.status !== status) {
          status = ev.status;
          // Events carry no node: the job says where it renders now.
          api("GET", `${jobsAPI()}/${j.id}`).then((now) => { nodeCell.textContent = now.node || ""; }).catch(() => {});
        }
        statusCell.replaceChildren(badge(ev.status));
        progressCell.replaceChildren(progressBar(ev.status, ev.progress), h("span", { class: "pct" }, `${Math.round(ev.progress || 0)}%`));
        box.disabled = !waiting(ev.status);
        if (box.disabled && box.checked) { box.checked = false; selected.delete(j.id); cancelButton.disabled = !selected.size; }
      },
    };
  }

  async function cancelSelected() {
    const ids = [...selected];
    if (!confirm(`Cancel ${ids.length} job${ids.length === 1 ? "" : "s"}, with their related jobs still waiting?`)) return;
    try {
      let cancelled = 0;
      if (admin) {
        for (const id of ids) cancelled += (await api("PATCH", `${jobsAPI()}/${id}/cancel`)).length;
      } else {
        cancelled = (await api("POST", "/api/v2/jobs/cancel", { jobs: ids })).length;
      }
      toast(`${cancelled} job${cancelled === 1 ? "" : "s"} cancelled (with their related jobs)`);
      selected.clear();
      cancelButton.disabled = true;
      load(true);
    } catch (e) { toast(`not cancelled: ${e.message}`); }
  }

  let reloadTimer = null;
  const reloadSoon = () => { clearTimeout(reloadTimer); reloadTimer = setTimeout(() => load(true), 300); };
  const stopEvents = onEvents((ev) => {
    if (ev.type === "refresh") { reloadSoon(); return; }
    const row = rows.get(ev.id);
    if (row) row.update(ev);
    else if (sort === "newest_first" && (!states.size || states.has(ev.status))) reloadSoon(); // a new job
  });
  // The farm's event stream carries render nodes, not every team's jobs: the admin's list is
  // read again every few seconds instead.
  const ticker = setInterval(() => { if (admin && !document.hidden) load(true, true); else for (const row of rows.values()) row.tick(); }, admin ? 5000 : 15000);
  const stopKeys = listKeys(tbody, tagsInput);
  leaveScreen = () => { stopEvents(); clearInterval(ticker); stopKeys(); };

  const chips = JOB_STATES.map((s) => h("label", { class: "chip" },
    h("input", { type: "checkbox", checked: states.has(s), onchange: (e) => { e.target.checked ? states.add(s) : states.delete(s); load(true); } }), statusText(s)));
  const sortSelect = h("select", { "aria-label": "sort", id: "job-sort", onchange: (e) => { sort = e.target.value; load(true); } },
    ...[["newest_first", "newest first"], ["oldest_first", "oldest first"], ["priority", "pickup order"]].map(([v, text]) => h("option", { value: v, selected: v === sort }, text)));
  load(true);
  const heads = [mayAct() ? "" : null, "Job", admin ? "Team" : null, "Status", "Progress", "Template", "Priority", "Tags", "Node", "Created"].filter((x) => x !== null);
  return [
    h("h1", {}, admin ? "Every team's jobs" : "Jobs", admin ? null : liveBadge(), count),
    h("div", { class: "toolbar" }, ...chips, sortSelect, cancelButton),
    h("div", { class: "toolbar" }, admin ? [teamSelect, engineInput, poolInput] : null, nameInput, tagsInput, templateChip,
      h("span", { class: "muted" }, "created"), fromInput, h("span", { class: "muted" }, "to"), toInput,
      h("span", { class: "muted keys" }, mayAct() ? "keys: j k move, Enter opens, x selects, / searches" : "keys: j k move, Enter opens, / searches")),
    h("div", { class: "table-wrap" }, h("table", {},
      h("thead", {}, h("tr", {}, ...heads.map((t) => h("th", {}, t)))),
      tbody)),
    h("div", { class: "toolbar" }, more),
  ];
}

// listKeys lets the keyboard walk a list: j and k move between rows, Enter (or o) opens the row's
// link, x ticks its box, / goes to the search box. Keys typed into a field are the field's.
function listKeys(tbody, search) {
  let at = -1;
  const onKey = (e) => {
    if (e.metaKey || e.ctrlKey || e.altKey || e.target.closest("input, select, textarea, button")) return;
    const trs = [...tbody.querySelectorAll("tr[data-job]")];
    const move = (to) => {
      if (!trs.length) return;
      at = Math.max(0, Math.min(trs.length - 1, to));
      trs.forEach((tr, i) => tr.classList.toggle("cursor", i === at));
      trs[at].scrollIntoView({ block: "nearest" });
    };
    const current = trs[at];
    switch (e.key) {
      case "j": move(at + 1); break;
      case "k": move(at - 1); break;
      case "Enter": case "o": if (current) navigate(current.querySelector("a[data-link]").getAttribute("href")); break;
      case "x": if (current) { const box = current.querySelector("input[type=checkbox]"); if (box && !box.disabled) box.click(); } break;
      case "/": search.focus(); break;
      default: return;
    }
    e.preventDefault();
  };
  document.addEventListener("keydown", onKey);
  return () => document.removeEventListener("keydown", onKey);
}

// settingsText says what a job renders to: its type, frames, codec, quality and engine.
function settingsText(job) {
  const st = job.settings || {};
  const frames = st.frames === undefined ? "" : Array.isArray(st.frames) ? `frames ${st.frames[0]}–${st.frames[1]}` : `frame ${st.frames}`;
  return [st.type || (job.kind === "join" ? "joined video" : "video"), frames, st.codec, st.quality, st.engine && `on ${st.engine}`, st.preset]
    .filter(Boolean).join(", ");
}

function outputView(job) {
  if (job.status !== "finished" || !job.outputUrl) return null;
  const path = new URL(job.outputUrl, location.href).pathname.toLowerCase();
  let media = null;
  if (/\.(mp4|mov|webm)$/.test(path)) media = h("video", { src: job.outputUrl, controls: true, preload: "metadata", id: "output-video" });
  else if (/\.(png|jpe?g)$/.test(path)) media = h("img", { class: "output", src: job.outputUrl, alt: "the rendered image" });
  return h("section", { class: "panel" }, h("h2", {}, "Output"), media, h("p", {}, h("a", { href: job.outputUrl, download: "" }, "Download the output")));
}

// The job's log tells its story: the lines that mark a step of it (creation, each attempt on its
// node, its end, each webhook delivery) make its timeline.
const MILESTONES = [
  [/^created(,| as )/, "created"], [/^frames \d+ to \d+ rendered on node /, "chunk-rendered"], [/^all \d+ chunks rendered/, "chunk-rendered"],
  [/^dispatched to node /, "attempt"], [/^attempt \d+ on node .* ended/, "failed"],
  [/^queued again/, "requeued"], [/storage failed the attempt/, "requeued"], [/^frames \d+ to \d+: attempt \d+ on node .* taken back/, "requeued"], [/^attempt \d+ on node .* carried on across/, "attempt"],
  [/^finished on node /, "finished"], [/^stopped by /, "cancelled"], [/cancel/i, "cancelled"],
  [/^webhook delivered/, "webhook"], [/^webhook attempt \d+ failed/, "webhook-retry"], [/^webhook failed/, "webhook-failed"],
  [/^(the job failed|failed after|children failed|a child failed)/i, "failed"], [/^chunk \d+ of \d+ .* failed/, "failed"],
];

// deliveriesOf reads the webhook's attempts from the log: when, the attempt, its outcome (the
// receiver's status or the error), and when the next attempt is due.
function deliveriesOf(log) {
  const rows = [];
  for (const line of log.split("\n")) {
    const m = /^(\S+Z) webhook (.*)$/.exec(line);
    if (!m) continue;
    let attempt = "", outcome = m[2], next = "", kind = "";
    let d;
    if ((d = /^delivered \(attempt (\d+), (.*)\)$/.exec(m[2]))) [attempt, outcome, kind] = [d[1], d[2], "finished"];
    else if ((d = /^attempt (\d+) failed \((.*)\); next attempt in (.*)$/.exec(m[2]))) [attempt, outcome, next, kind] = [d[1], d[2], d[3], "cancelled"];
    else if ((d = /^failed after (\d+) attempts, giving up: (.*)$/.exec(m[2]))) [attempt, outcome, kind] = [d[1], d[2], "error"];
    rows.push(h("tr", {}, h("td", { class: "muted" }, new Date(m[1]).toLocaleTimeString()), h("td", {}, attempt),
      h("td", {}, h("span", { class: `badge ${kind}` }, kind === "finished" ? "delivered" : kind === "error" ? "gave up" : kind ? "retrying" : "—")),
      h("td", { class: "name", title: outcome }, outcome), h("td", { class: "muted" }, next)));
  }
  return rows;
}

// assetItem says what an asset does: where it goes, and what it puts there (a text, a value, a
// file, a function's parameters, a child job). Secret references show as written, never their
// values.
function assetItem(a) {
  const where = `${a.type}${a.layerName ? ` → ${a.layerName}` : ""}${a.composition ? ` in ${a.composition}` : ""}`;
  let what = "";
  if (a.type === "function") what = `${a.name || ""}${a.params ? ` ${JSON.stringify(a.params)}` : ""}`;
  else if (a.type === "job") what = a.jobId ? `child job ${a.jobId}` : "a child job";
  else if (a.expression) what = `${a.property ? `${a.property} = ` : ""}expression ${a.expression}`;
  else if (a.value !== undefined) what = `${a.property ? `${a.property} = ` : ""}${typeof a.value === "string" ? `“${a.value}”` : JSON.stringify(a.value)}`;
  else if (a.src) what = a.src;
  return h("li", {}, where, what ? h("span", { class: "injected" }, ": ", what) : "");
}

function timelineOf(log) {
  const items = [];
  for (const line of log.split("\n")) {
    const m = /^(\S+Z) (.*)$/.exec(line);
    if (!m) continue;
    const hit = MILESTONES.find(([re]) => re.test(m[2]));
    if (hit) items.push(h("li", { class: `step ${hit[1]}` }, h("time", { datetime: m[1] }, new Date(m[1]).toLocaleTimeString()), " ", m[2]));
  }
  return items.length ? items : [h("li", { class: "muted" }, "nothing yet")];
}

function jobScreen(id) {
  const container = h("div");
  let shown = "";
  const logPre = h("pre", { class: "log", "aria-label": "log" }, "…");
  const timeline = h("ol", { class: "timeline" });
  const deliveries = h("section", { class: "panel", id: "deliveries", hidden: true }, h("h2", {}, "Webhook deliveries"),
    h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "When"), h("th", {}, "Attempt"),
      h("th", {}, "Result"), h("th", {}, "Receiver's answer or error"), h("th", {}, "Next attempt in"))), h("tbody"))));
  async function load() {
    let job;
    const names = await templateNames();
    try { job = await api("GET", `${jobsAPI()}/${id}`); shown = JSON.stringify(job); } catch (e) {
      container.replaceChildren(h("p", { class: "empty" }, e.status === 404 ? "No such job." : e.message));
      return;
    }
    const stats = job.stats || {};
    const waiting = ["queued", "pending"].includes(job.status);
    const acts = mayAct();
    // A retry is tagged retry-of-ID: the job links to the retries made of it, and to what it retries.
    const retryOf = (job.tags || []).find((t) => t.startsWith("retry-of-"));
    const retries = ["error", "manually_cancelled"].includes(job.status)
      ? await api("GET", `${jobsAPI()}?tags=retry-of-${id}&limit=10&sort=oldest_first${job.team ? `&team=${encodeURIComponent(job.team.id)}` : ""}`).catch(() => [])
      : [];
    const chunks = job.chunks || [];
    const attempts = chunks.length
      ? `${chunks.reduce((n, c) => n + (c.attempts || 0), 0)} over its ${chunks.length} chunks${job.attempts ? `, and ${job.attempts} to join them` : ""}`
      : String(job.attempts || 0);
    const ended = job.status === "error" ? "Failed" : job.status === "manually_cancelled" ? (stats.startedAt ? "Stopped" : "Cancelled") : "Finished";
    const renderTime = stats.renderDuration ? seconds(stats.renderDuration) : null;
    const cancel = waiting && acts
      ? h("button", { class: "danger", onclick: async () => {
        if (!confirm(`Cancel the job ${job.id}, with its related jobs still waiting?`)) return;
        try {
          const cancelled = await api("PATCH", `${jobsAPI()}/${id}/cancel`);
          toast(`cancelled: ${cancelled.map((j) => j.id).join(", ")}`);
          load();
        } catch (e) { toast(`not cancelled: ${e.message}`); }
      } }, "Cancel")
      : null;
    const stop = job.status === "render:dorender" && acts
      ? h("button", { class: "danger", onclick: async () => {
        if (!confirm(`Stop the render of ${job.id} on node ${job.node || "?"}? What it rendered so far is discarded.`)) return;
        try { await api("POST", `${jobsAPI()}/${id}/stop`); toast("render stopped"); load(); } catch (e) { toast(`not stopped: ${e.message}`); }
      } }, "Stop")
      : null;
    const retry = ["error", "manually_cancelled"].includes(job.status) && acts
      ? h("button", { onclick: async () => {
        try {
          const again = await api("POST", `${jobsAPI()}/${id}/retry`);
          toast(`retried as ${again.id}`);
          navigate(`/ui/jobs/${again.id}`);
        } catch (e) { toast(`not retried: ${e.message}`); }
      } }, "Retry")
      : null;
    container.replaceChildren(...[
      h("h1", {}, "Job ", h("span", { class: "mono" }, job.id), badge(job.status), liveBadge(), h("span", { class: "actions" }, cancel, stop, retry)),
      h("section", { class: "panel" },
        progressBar(job.status, job.progress),
        h("dl", { class: "facts" },
          job.name ? [h("dt", {}, "Name"), h("dd", { id: "job-name-fact" }, job.name)] : null,
          job.team ? [h("dt", {}, "Team"), h("dd", {}, job.team.name)] : null,
          h("dt", {}, "Progress"), h("dd", {}, `${Math.round(job.progress || 0)}%`),
          h("dt", {}, "Template"), h("dd", {}, templateLink(job.templateId, names, job.templateName)),
          job.composition ? [h("dt", {}, "Composition"), h("dd", {}, job.composition)] : null,
          h("dt", {}, "Output"), h("dd", {}, settingsText(job)),
          h("dt", {}, "Created"), h("dd", {}, when(stats.createdAt)),
          h("dt", {}, "Started"), h("dd", {}, when(stats.startedAt)),
          h("dt", {}, ended), h("dd", {}, when(stats.finishedAt || stats.errorAt)),
          renderTime || job.chunksRenderDuration ? [h("dt", {}, "Render time"), h("dd", { id: "render-time" }, renderTime || "—",
            job.chunksRenderDuration ? h("span", { class: "muted" }, ` (its chunks' slots: ${seconds(job.chunksRenderDuration)})`) : null)] : null,
          h("dt", {}, "Attempts"), h("dd", { id: "attempts" }, attempts),
          h("dt", {}, "Priority"), h("dd", {}, String(job.priority || 0)),
          h("dt", {}, "Tags"), h("dd", {}, (job.tags || []).length ? job.tags.join(", ") : "—"),
          job.pool ? [h("dt", {}, "Pool"), h("dd", {}, job.pool)] : null,
          (job.limits || []).length ? [h("dt", {}, "Limits"), h("dd", {}, job.limits.join(", "))] : null,
          job.node ? [h("dt", {}, "Node"), h("dd", {}, job.node)] : null,
          stats.error ? [h("dt", {}, "Error"), h("dd", {}, stats.error)] : null,
          stats.waitingFor ? [h("dt", {}, "Waiting for"), h("dd", {}, stats.waitingFor)] : null,
          job.parentId ? [h("dt", {}, "Parent"), h("dd", {}, h("a", { href: `/ui/jobs/${job.parentId}`, "data-link": true }, job.parentId))] : null,
          job.children && job.children.length ? [h("dt", {}, "Children"), h("dd", {}, ...job.children.map((c) => h("div", {}, h("a", { href: `/ui/jobs/${c}`, "data-link": true }, c))))] : null,
          job.batchId ? [h("dt", {}, "Batch"), h("dd", {}, h("a", { href: `/ui/batches/${job.batchId}`, "data-link": true, class: "mono" }, job.batchId))] : null,
          retryOf ? [h("dt", {}, "Retry of"), h("dd", {}, h("a", { href: `/ui/jobs/${retryOf.slice(9)}`, "data-link": true, class: "mono" }, retryOf.slice(9)))] : null,
          retries.length ? [h("dt", {}, "Retried as"), h("dd", { id: "retried-as" }, ...retries.map((r) => h("div", {},
            h("a", { href: `/ui/jobs/${r.id}`, "data-link": true, class: "mono" }, r.id), " ", badge(r.status))))] : null)),
      chunksPanel(job.chunks),
      chunksTable(job, load),
      waiting && acts ? retagForm(job, load) : null,
      outputView(job),
      h("section", { class: "panel" }, h("h2", {}, "Assets"),
        job.assets && job.assets.length ? h("ul", { class: "assets" }, ...job.assets.map(assetItem)) : h("p", { class: "muted" }, "none")),
      h("section", { class: "panel" }, h("h2", {}, "Timeline"), timeline),
      deliveries,
      h("section", { class: "panel" }, h("h2", {}, "Log"), logPre)].filter(Boolean));
    try {
      const resp = await fetch(`${jobsAPI()}/${id}/logs`, { headers: { Authorization: `Bearer ${token}` } });
      const text = resp.ok ? await resp.text() : `HTTP ${resp.status}`;
      logPre.textContent = text;
      logPre.scrollTop = logPre.scrollHeight;
      timeline.replaceChildren(...timelineOf(text));
      const rows = deliveriesOf(text);
      deliveries.hidden = rows.length === 0;
      deliveries.querySelector("tbody").replaceChildren(...rows);
    } catch { /* the next event reloads */ }
  }
  let timer = null;
  const stopEvents = onEvents((ev) => {
    if (ev.id === id || ev.type === "refresh") { clearTimeout(timer); timer = setTimeout(load, 200); }
  });
  // The farm's event stream carries no job's changes: the admin's page reads the job again.
  // Only a change redraws it, so a form being filled in is left alone.
  const ticker = me.kind === "admin" ? setInterval(() => {
    if (!document.hidden) api("GET", `${jobsAPI()}/${id}?stale=true`).then((now) => { if (JSON.stringify(now) !== shown) load(); }).catch(() => {});
  }, 3000) : null;
  leaveScreen = () => { stopEvents(); clearInterval(ticker); };
  load();
  return [container];
}

// chunksTable lists a split job's chunks one row each: frames, state, node, when it started and
// how long it rendered, its attempts (those that failed count against the job's). The farm's
// admin also gets a button that takes a rendering chunk back from its node and queues it again
// (a render stuck on a slow node).
function chunksTable(job, reload) {
  if (!job.chunks || !job.chunks.length) return null;
  const admin = me.kind === "admin";
  const rows = job.chunks.map((c) => h("tr", { "data-chunk": String(c.index) },
    h("td", { class: "num" }, String(c.index + 1)),
    h("td", {}, `${c.frames[0]}–${c.frames[1]}`),
    h("td", {}, badge(c.status)),
    h("td", {}, progressBar(c.status, c.progress), h("span", { class: "pct" }, `${Math.round(c.progress || 0)}%`)),
    h("td", { class: "name mono" }, c.node || ""),
    h("td", { class: "muted", title: when(c.startedAt) }, c.startedAt ? new Date(c.startedAt).toLocaleTimeString() : ""),
    h("td", { class: "num", "data-field": "render-time" }, c.renderDuration ? seconds(c.renderDuration) : ""),
    h("td", { class: "num" }, String(c.attempts || 0), c.failedAttempts ? h("span", { class: "muted" }, ` (${c.failedAttempts} failed)`) : null),
    h("td", { class: "name muted" }, c.error || ""),
    admin ? h("td", {}, c.status === "render:dorender" ? h("button", { class: "quiet", onclick: async () => {
      if (!confirm(`Take chunk ${c.index + 1} back from node ${c.node} and queue it again?`)) return;
      try {
        await api("POST", `${jobsAPI()}/${job.id}/chunks/${c.index}/retry`);
        toast(`chunk ${c.index + 1} queued again`);
        reload();
      } catch (e) { toast(`not sent again: ${e.message}`); }
    } }, "Send again") : null) : null));
  const heads = ["#", "Frames", "Status", "Progress", "Node", "Started", "Render time", "Attempts", "Error", admin ? "" : null].filter((t) => t !== null);
  return h("section", { class: "panel", id: "chunk-table" }, h("h2", {}, "Chunks, one by one"),
    h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {}, ...heads.map((t) => h("th", {}, t)))),
      h("tbody", {}, ...rows))));
}

// retagForm changes a waiting job's priority and tags: its place in the queue.
function retagForm(job, reload) {
  const priority = h("input", { type: "number", id: "job-priority", min: "-1000000", max: "1000000", step: "1", value: String(job.priority || 0), "aria-label": "priority" });
  const tags = h("input", { type: "text", id: "job-tags", value: (job.tags || []).join(", "), placeholder: "tags, comma separated", "aria-label": "tags" });
  return h("form", { class: "panel toolbar", id: "retag", onsubmit: async (e) => {
    e.preventDefault();
    try {
      await api("PATCH", `${jobsAPI()}/${job.id}`, { priority: Number(priority.value), tags: tags.value.split(",").map((t) => t.trim()).filter(Boolean) });
      toast("priority and tags saved");
      reload();
    } catch (err) { toast(`not saved: ${err.message}`); }
  } }, h("label", { for: "job-priority" }, "Priority"), priority, h("label", { for: "job-tags" }, "Tags"), tags,
  h("button", { type: "submit" }, "Save"), h("span", { class: "muted" }, "Higher priorities render first; a waiting job can change both."));
}

function templatesScreen() {
  const tbody = h("tbody");
  const progress = h("progress", { max: "100", value: "0", hidden: true });
  async function load() {
    const list = await api("GET", "/api/v3/templates");
    tbody.replaceChildren(...(list.length ? list.map((t) => h("tr", {},
      h("td", { class: "name" }, h("a", { href: `/ui/templates/${t.id}`, "data-link": true }, t.displayName)),
      h("td", {}, t.type), h("td", {}, badge(t.status)), h("td", { class: "muted" }, age(t.createdAt))))
      : [h("tr", {}, h("td", { colspan: "4", class: "empty" }, mayAct() ? "No templates yet: drop a .zip, .aep, .mogrt or Lottie .json above." : "No templates yet."))]));
  }
  async function upload(file) {
    const ext = file.name.split(".").pop().toLowerCase();
    const type = { aepx: "aep" }[ext] || ext;
    if (!["aep", "zip", "mogrt", "json"].includes(type)) { toast("a template is a .zip, .aep, .mogrt or Lottie .json file"); return; }
    try {
      const tpl = await api("POST", "/api/v2/templates", { type, displayName: file.name.replace(/\.[^.]+$/, "") });
      progress.hidden = false;
      await new Promise((resolve, reject) => {
        const xhr = new XMLHttpRequest();
        xhr.open("PUT", tpl.uploadInfo.url);
        xhr.setRequestHeader("Content-Type", "application/octet-stream");
        xhr.upload.onprogress = (e) => { if (e.lengthComputable) progress.value = (100 * e.loaded) / e.total; };
        xhr.onload = () => (xhr.status < 300 ? resolve() : reject(new Error(`upload: HTTP ${xhr.status} ${xhr.responseText}`)));
        xhr.onerror = () => reject(new Error("upload failed"));
        xhr.send(file);
      });
      toast(`${file.name} uploaded; it is being inspected`);
      navigate(`/ui/templates/${tpl.id}`);
    } catch (e) { toast(e.message); } finally { progress.hidden = true; }
  }
  const input = h("input", { type: "file", id: "template-file", accept: ".zip,.aep,.aepx,.mogrt,.json", onchange: (e) => e.target.files[0] && upload(e.target.files[0]) });
  const drop = h("div", {
    class: "drop",
    ondragover: (e) => { e.preventDefault(); drop.classList.add("over"); },
    ondragleave: () => drop.classList.remove("over"),
    ondrop: (e) => { e.preventDefault(); drop.classList.remove("over"); if (e.dataTransfer.files[0]) upload(e.dataTransfer.files[0]); },
  }, "Drop a template here, or ", h("label", { class: "chip file" }, "choose a file", input), progress);
  load().catch((e) => toast(e.message));
  leaveScreen = onEvents((ev) => { if (ev.type === "template" || ev.type === "refresh") load().catch(() => {}); });
  return [h("h1", {}, "Templates", liveBadge()), mayAct() ? h("section", { class: "panel" }, drop) : null,
    h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Type"), h("th", {}, "Status"), h("th", {}, "Created"))), tbody))];
}

// renderForm starts a job from the template's page: a composition, and a value for each of its
// text layers (and those of compositions nested in it), then a video or a still.
function renderForm(tpl, comps, byComp) {
  const compSelect = h("select", { id: "render-composition", "aria-label": "composition" }, ...comps.map((c) => h("option", { value: c.name }, c.name)));
  const fields = h("div", { class: "fields" });
  const nestedTexts = (comp) => {
    const seen = new Set(), out = [], todo = [comp.aeid];
    while (todo.length) {
      const aeid = todo.shift();
      if (seen.has(aeid)) continue;
      seen.add(aeid);
      for (const l of byComp.get(aeid) || []) {
        if (l.layer_type === "text" && !out.some((o) => o.name === l.name)) out.push(l);
        if (l.source_comp_id) todo.push(String(l.source_comp_id));
      }
    }
    return out;
  };
  const fill = () => {
    const comp = comps.find((c) => c.name === compSelect.value);
    fields.replaceChildren(...nestedTexts(comp).map((l) => h("label", { class: "field" }, h("span", {}, l.name),
      h("input", { type: "text", "data-text-layer": l.name, placeholder: (l.data && l.data.text) || "", "aria-label": `text of ${l.name}` }))));
  };
  compSelect.addEventListener("change", fill);
  fill();
  const output = h("select", { id: "render-output", "aria-label": "output" }, h("option", { value: "video" }, "video"),
    h("option", { value: "preview" }, "video, first 2 seconds"), h("option", { value: "image" }, "still (first frame)"));
  const submit = h("button", { type: "submit", id: "render-submit" }, "Render");
  return h("form", { class: "panel", onsubmit: async (e) => {
    e.preventDefault();
    submit.disabled = true;
    const assets = [...fields.querySelectorAll("input[data-text-layer]")].filter((i) => i.value !== "")
      .map((i) => ({ type: "text", layerName: i.dataset.textLayer, value: i.value }));
    const body = { template: { id: tpl.id, composition: compSelect.value }, assets };
    if (output.value === "image") body.settings = { type: "image", frames: 0 };
    if (output.value === "preview") {
      const comp = comps.find((c) => c.name === compSelect.value);
      body.settings = { type: "video", frames: [0, Math.max(1, Math.round(comp.frame_rate * 2) - 1)] };
    }
    try {
      const job = await api("POST", "/api/v2/jobs", body);
      navigate(`/ui/jobs/${job.id}`);
    } catch (err) { toast(`not started: ${err.message}`); submit.disabled = false; }
  } }, h("h2", {}, "Render it"), h("div", { class: "toolbar" }, compSelect, output, submit), fields);
}

// posterPanel shows a still of the template: the output of the newest job tagged poster-ID, the
// middle frame of its outermost composition. When there is none, the page asks for one if a
// ready render node offers an engine for the template, and otherwise says why there is none.
function posterPanel(tpl, comps, byComp) {
  const tag = `poster-${tpl.id}`;
  const nested = new Set();
  for (const layers of byComp.values()) for (const l of layers) if (l.source_comp_id) nested.add(String(l.source_comp_id));
  const comp = comps.find((c) => !nested.has(c.aeid)) || comps[0];
  const frame = Math.floor((comp.duration * comp.frame_rate) / 2);
  const body = h("div", {}, h("p", { class: "muted" }, "…"));
  const panel = h("section", { class: "panel poster", id: "poster" }, h("h2", {}, "Poster frame"), body);
  let jobId = null;
  const again = () => (mayAct() ? h("button", { class: "quiet", onclick: () => request("").catch((e) => toast(e.message)) }, "Render it again") : "");
  function showJob(job) {
    jobId = job.id;
    panel.dataset.status = job.status;
    const link = h("a", { href: `/ui/jobs/${job.id}`, "data-link": true }, `frame ${job.settings && job.settings.frames} of ${job.composition}`);
    if (job.status === "finished") {
      const img = h("img", { class: "output", src: job.outputUrl, alt: `poster frame of ${tpl.displayName}`,
        onerror: () => img.replaceWith(h("p", { class: "muted" }, "The rendered frame is not an image this browser shows.")) });
      body.replaceChildren(img, h("p", { class: "muted" }, link));
    } else if (["error", "manually_cancelled", "cancelled"].includes(job.status)) {
      body.replaceChildren(h("p", { class: "muted" }, `The poster frame (`, link, `) ${job.status === "error" ? `failed: ${(job.stats && job.stats.error) || "no reason given"}` : "was cancelled"}. `), again());
    } else {
      body.replaceChildren(progressBar(job.status, job.progress), h("p", { class: "muted" }, "Rendering ", link, job.stats && job.stats.waitingFor ? `: ${job.stats.waitingFor}` : "…"));
    }
  }
  // request asks for a poster frame; the first one of a template carries an idempotency key, so
  // two pages opened at once ask for one between them.
  async function request(key) {
    const [full, team] = await Promise.all([api("GET", `/api/v2/templates/${tpl.id}`), api("GET", "/api/v2/team")]);
    const engine = (full.engines || []).find((e) => (team.engines || []).includes(e));
    if (!engine) {
      panel.dataset.status = "no-engine";
      body.replaceChildren(h("p", { class: "muted" }, `No ready render node offers an engine for this template (${(full.engines || []).join(", ") || "none"}), so it has no poster frame yet.`),
        h("button", { class: "quiet", onclick: () => request(key).catch((e) => toast(e.message)) }, "Look again"));
      return;
    }
    const job = await api("POST", "/api/v2/jobs", {
      template: { id: tpl.id, composition: comp.name }, assets: [], tags: [tag],
      settings: { type: "image", frames: frame, engine },
    }, key ? { "Idempotency-Key": key } : {});
    await refresh(job.id);
  }
  async function refresh(id) {
    if (id) { showJob(await api("GET", `/api/v2/jobs/${id}`)); return; }
    const [newest] = await api("GET", `/api/v2/jobs?tags=${tag}&sort=newest_first&limit=1&minimal=false`);
    if (newest) showJob(newest);
    else if (mayAct()) await request(tag);
    else body.replaceChildren(h("p", { class: "muted" }, "No poster frame has been rendered yet."));
  }
  refresh().catch((e) => body.replaceChildren(h("p", { class: "empty" }, e.message)));
  return { panel, onEvent: (ev) => { if (ev.type === "job" && ev.id === jobId) refresh(jobId).catch(() => {}); } };
}

function templateScreen(id) {
  const container = h("div", {}, h("p", { class: "muted" }, "…"));
  let poster = null;
  async function load() {
    const tpl = await api("GET", `/api/v3/templates/${id}`);
    const head = h("h1", {}, tpl.displayName, badge(tpl.status));
    const rename = h("button", { class: "quiet", onclick: async () => {
      const name = prompt("New name", tpl.displayName);
      if (!name) return;
      try { await api("PATCH", `/api/v2/templates/${id}`, { displayName: name }); load(); } catch (e) { toast(e.message); }
    } }, "Rename");
    const remove = h("button", { class: "danger", onclick: async () => {
      if (!confirm(`Delete the template ${tpl.displayName}?`)) return;
      try {
        // A poster frame still waiting for a render node would keep the template in use.
        for (const j of await api("GET", `/api/v2/jobs?tags=poster-${id}&states=queued`)) await api("PATCH", `/api/v2/jobs/${j.id}/cancel`);
        await api("DELETE", `/api/v2/templates/${id}`);
        toast("template deleted");
        navigate("/ui/templates");
      } catch (e) { toast(e.message); }
    } }, "Delete");
    if (mayAct()) head.append(h("span", { class: "actions" }, rename, remove));
    if (tpl.status !== "uploaded") {
      container.replaceChildren(head, h("p", { class: tpl.status === "error" ? "problem" : "muted" }, tpl.error || "Inspecting the file…"));
      return; // its next status arrives as an event
    }
    const [comps, layers, v2] = await Promise.all([api("GET", `/api/v3/templates/${id}/compositions?limit=1000`),
      api("GET", `/api/v3/templates/${id}/layers?limit=1000`), api("GET", `/api/v2/templates/${id}`)]);
    // A font its texts use that the farm has no file of is replaced at render: said first.
    const fonts = v2.missingFonts && v2.missingFonts.length ? h("p", { class: "problem", id: "missing-fonts" },
      `Fonts this template uses that it does not bundle and your library does not hold: ${v2.missingFonts.join(", ")}. `,
      "Their texts render in another font unless the render nodes have them installed: upload them under Fonts and secrets.") : null;
    const byComp = new Map(comps.map((c) => [c.aeid, []]));
    for (const l of layers) (byComp.get(String(l.composition_id)) || []).push(l);
    const nameOf = new Map(comps.map((c) => [c.aeid, c.name]));
    poster = comps.length ? posterPanel(tpl, comps, byComp) : null;
    const form = mayAct() ? renderForm(tpl, comps, byComp) : null;
    container.replaceChildren(head, fonts || "", poster && form ? h("div", { class: "split" }, poster.panel, form) : poster ? poster.panel : form || "",
      h("p", { class: "muted" }, "Use a composition's name as template.composition and a layer's name as an asset's layerName. Layers inside nested compositions are found from the composition that nests them."),
      ...comps.map((c) => h("section", { class: "panel", "data-composition": c.name },
        h("h2", {}, c.name, " ", h("span", { class: "muted" }, `${c.width}×${c.height}, ${c.frame_rate} fps, ${c.duration} s`)),
        h("ul", { class: "tree" }, ...(byComp.get(c.aeid) || []).map((l) => h("li", { "data-layer": l.name },
          h("span", { class: "mono" }, l.name), " ", h("span", { class: "badge" }, l.layer_type),
          l.source_comp_id ? [" → ", h("span", { class: "muted" }, nameOf.get(String(l.source_comp_id)) || "")] : null))))));
  }
  const show = () => load().catch((e) => container.replaceChildren(h("p", { class: "empty" }, e.status === 404 ? "No such template." : e.message)));
  leaveScreen = onEvents((ev) => {
    if ((ev.type === "template" && ev.id === id) || ev.type === "refresh") show();
    else if (poster) poster.onEvent(ev);
  });
  show();
  return [container];
}

// batchesScreen lists the team's batches, newest first, each with its counts as a bar.
function batchesScreen() {
  const tbody = h("tbody");
  const more = h("button", { class: "quiet", hidden: true, onclick: () => load(false) }, "Load more");
  const pageSize = 20;
  let loaded = 0;
  async function load(reset) {
    const page = await api("GET", `/api/v2/batches?limit=${pageSize}&from=${reset ? 0 : loaded}`);
    if (reset) { tbody.replaceChildren(); loaded = 0; }
    for (const b of page) {
      const st = b.stats;
      tbody.append(h("tr", { "data-batch": b.batchId },
        h("td", { class: "id" }, h("a", { href: `/ui/batches/${b.batchId}`, "data-link": true }, b.batchId), b.name ? h("div", { class: "job-name" }, b.name) : null),
        h("td", {}, batchBadge(b)),
        h("td", {}, countsBar(st)),
        h("td", {}, countsText(st)),
        h("td", { class: "muted", title: when(b.createdAt) }, age(b.createdAt))));
    }
    loaded += page.length;
    more.hidden = page.length < pageSize;
    if (!loaded) tbody.append(h("tr", {}, h("td", { colspan: "5", class: "empty" }, "No batches yet: POST /api/v2/batches creates up to 1000 jobs at once.")));
  }
  let timer = null;
  leaveScreen = onEvents((ev) => {
    if (ev.batchId || ev.type === "refresh") { clearTimeout(timer); timer = setTimeout(() => load(true).catch(() => {}), 500); }
  });
  load(true).catch((e) => toast(e.message));
  return [h("h1", {}, "Batches", liveBadge()),
    h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "Batch"), h("th", {}, "Status"), h("th", {}, "Jobs"),
      h("th", {}, ""), h("th", {}, "Created"))), tbody)),
    h("div", { class: "toolbar" }, more)];
}

// countsText says what became of a batch's jobs, each counted once (the API counts a cancelled
// job among the errors, as the public service does).
function countsText(st) {
  const failed = st.error - st.cancelled;
  return [`${st.finished} finished`, failed && `${failed} failed`, st.cancelled && `${st.cancelled} cancelled`, st.pending && `${st.pending} waiting or rendering`]
    .filter(Boolean).join(", ") + ` of ${st.total}`;
}

// batchBadge says where a batch stands: working while a job waits or renders; once none does,
// finished only when every job finished, cancelled when every job was, and otherwise how it
// ended ("ended, 1 cancelled").
function batchBadge(b) {
  const st = b.stats;
  const failed = st.error - st.cancelled;
  if (st.pending > 0) return badge(b.status);
  if (st.finished === st.total) return badge("finished");
  if (st.cancelled === st.total) return badge("manually_cancelled");
  if (failed === st.total) return badge("error");
  const text = ["ended", failed && `${failed} failed`, st.cancelled && `${st.cancelled} cancelled`].filter(Boolean).join(", ");
  return h("span", { class: `badge ${failed ? "error" : "cancelled"}`, "data-status": "ended" }, text);
}

// countsBar draws a batch's jobs by state as one stacked bar.
function countsBar(st) {
  const parts = [["finished", st.finished], ["error", st.error - st.cancelled], ["rendering", st.pending], ["cancelled", st.cancelled]];
  const bar = h("div", { class: "stack", role: "img", "aria-label": parts.map(([k, v]) => `${v} ${k}`).join(", ") });
  for (const [kind, n] of parts) {
    if (!n) continue;
    const seg = h("span", { class: `seg ${kind}`, title: `${n} ${kind}` });
    seg.style.flexGrow = String(n);
    bar.append(seg);
  }
  return bar;
}

function batchScreen(id) {
  const container = h("div", {}, h("p", { class: "muted" }, "…"));
  async function load() {
    let b;
    try { b = await api("GET", `/api/v2/batches/${id}`); } catch (e) {
      container.replaceChildren(h("p", { class: "empty" }, e.status === 404 ? "No such batch." : e.message));
      return;
    }
    const st = b.stats;
    const parts = [["finished", st.finished], ["error", st.error - st.cancelled], ["rendering", st.pending], ["cancelled", st.cancelled]];
    const bar = countsBar(st);
    const cancellable = mayAct() && b.jobs.some((j) => ["queued", "pending"].includes(j.status));
    const names = await templateNames();
    container.replaceChildren(
      h("h1", {}, b.name ? [b.name, " "] : "Batch ", h("span", { class: "mono" }, b.batchId), batchBadge(b), liveBadge(),
        cancellable ? h("button", { class: "danger actions", onclick: async () => {
          if (!confirm(`Cancel every job of the batch still waiting (${st.pending})?`)) return;
          try {
            const r = await api("POST", `/api/v2/batches/${id}/cancel`);
            toast(`${r.cancelledCount} cancelled, ${r.skippedCount} skipped`);
            load();
          } catch (e) { toast(e.message); }
        } }, "Cancel the batch") : null),
      h("section", { class: "panel" }, bar,
        h("p", { class: "legend" }, ...parts.map(([k, v]) => h("span", {}, h("span", { class: `dot ${k}` }), ` ${v} ${{ rendering: "waiting or rendering", error: "failed" }[k] || k}`)),
          h("span", { class: "muted" }, ` of ${st.total}`))),
      h("div", { class: "table-wrap" }, h("table", {},
        h("thead", {}, h("tr", {}, ...["#", "Job", "Template", "Status", "Render time"].map((t) => h("th", {}, t)))),
        h("tbody", {}, ...b.jobs.map((j) => h("tr", { "data-job": j.id },
          h("td", { class: "muted" }, String(j.index)),
          h("td", { class: "id" }, h("a", { href: `/ui/jobs/${j.id}`, "data-link": true }, j.id), j.name ? h("div", { class: "job-name" }, j.name) : null),
          h("td", { class: "name" }, templateLink(j.templateId, names)),
          h("td", {}, badge(j.status)),
          h("td", { class: "num muted" }, j.stats && j.stats.renderDuration ? seconds(j.stats.renderDuration) : "")))))));
  }
  let timer = null;
  leaveScreen = onEvents((ev) => {
    if (ev.batchId === id || ev.type === "refresh") { clearTimeout(timer); timer = setTimeout(load, 300); }
  });
  load();
  return [container];
}

function libraryScreen() {
  const fonts = h("tbody");
  const secrets = h("tbody");
  async function load() {
    const [fl, sl] = await Promise.all([api("GET", "/api/v2/fonts"), api("GET", "/api/v2/secrets")]);
    fonts.replaceChildren(...(fl.length ? fl.map((f) => h("tr", { "data-font": f.fileName },
      h("td", { class: "name" }, f.fileName), h("td", {}, f.familyName), h("td", { class: "muted" }, age(f.createdAt)),
      h("td", {}, mayAct() && h("button", { class: "quiet", onclick: async () => {
        if (!confirm(`Delete the font ${f.fileName}?`)) return;
        try { await api("DELETE", `/api/v2/fonts/${f.id}`); load(); } catch (e) { toast(e.message); }
      } }, "Delete"))))
      : [h("tr", {}, h("td", { colspan: "4", class: "empty" }, "No fonts. A job's fonts list names them by file name, family name or PostScript name; the fonts a template neither bundles nor finds here are named on its page."))]));
    secrets.replaceChildren(...(sl.length ? sl.map((x) => h("tr", { "data-secret": x.name },
      h("td", { class: "name mono" }, `\${secret.${x.name}}`), h("td", { class: "muted" }, age(x.createdAt)),
      h("td", {}, mayAct() && h("button", { class: "quiet", onclick: async () => {
        if (!confirm(`Delete the secret ${x.name}?`)) return;
        try { await api("DELETE", `/api/v2/secrets/${x.id}`); load(); } catch (e) { toast(e.message); }
      } }, "Delete"))))
      : [h("tr", {}, h("td", { colspan: "3", class: "empty" }, "No secrets."))]));
  }
  const fontFile = h("input", { type: "file", id: "font-file", accept: ".ttf,.otf", onchange: async (e) => {
    const file = e.target.files[0];
    if (!file) return;
    const form = new FormData();
    form.append("font", file);
    const resp = await fetch("/api/v2/fonts", { method: "POST", headers: { Authorization: `Bearer ${token}` }, body: form });
    const body = await resp.json().catch(() => ({}));
    toast(resp.ok ? `${file.name} added (${body.familyName})` : `not added: ${body.error || resp.status}`);
    e.target.value = "";
    load();
  } });
  const name = h("input", { type: "text", id: "secret-name", placeholder: "NAME", "aria-label": "secret name", pattern: "[A-Za-z0-9_\\-]{1,128}", title: "letters, digits, _ and -, up to 128", required: true });
  const secretValue = h("input", { type: "password", id: "secret-value", placeholder: "value", "aria-label": "secret value", autocomplete: "off", required: true });
  const form = h("form", { class: "toolbar", onsubmit: async (e) => {
    e.preventDefault();
    try {
      await api("PUT", "/api/v2/secrets", { name: name.value, value: secretValue.value });
      toast(`secret ${name.value} stored; it is never shown again`);
      name.value = "";
      secretValue.value = "";
      load();
    } catch (err) { toast(err.message); }
  } }, name, secretValue, h("button", { type: "submit" }, "Add secret"));
  load().catch((e) => toast(e.message));
  return [h("h1", {}, "Fonts and secrets"),
    h("section", { class: "panel" }, h("h2", {}, "Fonts"),
      mayAct() ? h("div", { class: "toolbar" }, h("label", { class: "chip file" }, "Add a font (.ttf, .otf)", fontFile)) : null,
      h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "File"), h("th", {}, "Family"), h("th", {}, "Added"), h("th", {}, ""))), fonts))),
    h("section", { class: "panel" }, h("h2", {}, "Secrets"),
      h("p", { class: "muted" }, "Jobs refer to a secret as ${secret.NAME}; its value is never shown, and is hidden from logs and errors."),
      mayAct() ? form : null,
      h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "Reference"), h("th", {}, "Added"), h("th", {}, ""))), secrets))),
    me.role === "manager" ? tokensPanel() : null];
}

// tokensPanel lets a team's manager issue its team's tokens (each shown once) and revoke them.
function tokensPanel() {
  const tbody = h("tbody");
  const shown = h("p", { class: "muted", id: "new-token" });
  async function load() {
    const list = await api("GET", "/api/v2/tokens");
    tbody.replaceChildren(...list.map((t) => h("tr", { "data-token": t.id },
      h("td", { class: "mono" }, t.id), h("td", {}, t.role), h("td", { class: "muted" }, age(t.createdAt)),
      h("td", { class: "muted" }, t.expired ? "expired" : t.expiresAt ? `until ${when(t.expiresAt)}` : "never expires"),
      h("td", {}, t.id === currentTokenID ? h("span", { class: "muted" }, "this page's") : h("button", { class: "quiet", onclick: async () => {
        if (!confirm(`Revoke the ${t.role}'s token ${t.id}? It stops working at once.`)) return;
        try { await api("DELETE", `/api/v2/tokens/${t.id}`); load(); } catch (e) { toast(e.message); }
      } }, "Revoke")))));
  }
  const role = h("select", { id: "token-role", "aria-label": "role" }, ...["viewer", "submitter", "manager"].map((r) => h("option", { value: r }, r)));
  const form = h("form", { class: "toolbar", onsubmit: async (e) => {
    e.preventDefault();
    try {
      const made = await api("POST", "/api/v2/tokens", { role: role.value });
      shown.replaceChildren(`A ${made.role}'s token, shown this once: `, h("code", {}, made.token));
      load();
    } catch (err) { toast(err.message); }
  } }, role, h("button", { type: "submit" }, "Issue a token"));
  load().catch((e) => toast(e.message));
  return h("section", { class: "panel", id: "tokens" }, h("h2", {}, "Tokens of the team"),
    h("p", { class: "muted" }, "A viewer's token reads only; a submitter's also sends and acts on work; a manager's also issues and revokes the team's tokens."),
    form, shown,
    h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {}, ...["Token", "Role", "Issued", "Expires", ""].map((t) => h("th", {}, t)))), tbody)));
}

// ---- charts: small SVGs, no library ----

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

// chart draws series over the minutes: bars (stacked, in order) or lines, with the scale of its
// values (axis, in what they count) and of time; its legend says what the last minute held, and
// notes add what is not drawn.
function chart(title, minutes, series, { kind = "line", unit = "", axis = "", span = "last hour", step = "min", notes = [] } = {}) {
  const W = 600, H = 120, pad = 4;
  const n = minutes.length;
  const values = series.map((s) => minutes.map(s.value));
  const top = Math.max(1, ...(kind === "bars" ? minutes.map((_, i) => values.reduce((a, v) => a + (v[i] || 0), 0)) : values.flat().filter((v) => v !== null)));
  const x = (i) => pad + (i * (W - 2 * pad)) / Math.max(1, n - 1);
  const y = (v) => H - pad - (v * (H - 2 * pad)) / top;
  const el = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", class: "chart", role: "img", "aria-label": title });
  if (kind === "bars") {
    const w = (W - 2 * pad) / n;
    minutes.forEach((_, i) => {
      let base = 0;
      series.forEach((s, k) => {
        const v = values[k][i] || 0;
        if (v > 0) el.append(svg("rect", { x: pad + i * w + 1, y: y(base + v), width: Math.max(1, w - 2), height: y(base) - y(base + v), class: s.class }));
        base += v;
      });
    });
  } else {
    series.forEach((s, k) => {
      const points = values[k].map((v, i) => (v === null ? null : [x(i), y(v)])).filter(Boolean);
      if (points.length > 1) el.append(svg("polyline", { points: points.map((p) => p.join(",")).join(" "), class: `line ${s.class}`, fill: "none" }));
      else if (points.length === 1) el.append(svg("circle", { cx: points[0][0], cy: points[0][1], r: 3, class: `point ${s.class}` }));
    });
  }
  // Bars count events: their legend gives the hour's total; lines give the latest value.
  const lastOf = (k) => { for (let i = n - 1; i >= 0; i--) if (values[k][i] !== null) return values[k][i]; return null; };
  const totalOf = (k) => values[k].reduce((a, v) => a + (v || 0), 0);
  const legend = series.map((s, k) => {
    const v = kind === "bars" ? totalOf(k) : lastOf(k);
    return h("span", {}, h("span", { class: `dot ${s.class}` }), ` ${s.label} `, h("b", {}, v === null ? "—" : `${Math.round(v * 10) / 10}${unit}`));
  });
  // "1 job", "2 jobs": a unit word loses its plural s at one ("s", seconds, is no word).
  const scale = (v) => {
    const n = Math.round(v * 10) / 10;
    return `${n} ${n === 1 && axis.length > 1 && axis.endsWith("s") ? axis.slice(0, -1) : axis}`.trim();
  };
  return h("figure", { class: "panel chart-panel" }, h("figcaption", {}, title, " ", h("span", { class: "muted" }, span)),
    h("div", { class: "plot" }, h("div", { class: "axis-y", "aria-hidden": "true" }, h("span", {}, scale(top)), h("span", {}, scale(top / 2)), h("span", {}, scale(0))),
      el, h("span"), h("div", { class: "axis-x", "aria-hidden": "true" }, h("span", {}, `${n} ${step} ago`), h("span", {}, `${Math.round(n / 2)} ${step} ago`), h("span", {}, "now"))),
    h("p", { class: "legend" }, ...legend, ...notes.map((n) => h("span", { class: "muted" }, n))));
}

function farmCharts(minutes) {
  const oldest = minutes.length ? minutes[minutes.length - 1].oldestQueuedSeconds : 0;
  return h("div", { class: "charts" },
    chart("Jobs per minute", minutes,
      [{ label: "finished", class: "finished", value: (m) => m.finished }, { label: "failed", class: "error", value: (m) => m.failed }], { kind: "bars", axis: "jobs" }),
    chart("Queue", minutes, [{ label: "queued", class: "rendering", value: (m) => m.queued }],
      { axis: "jobs", notes: oldest ? [`the oldest has waited ${seconds(oldest)}`] : [] }),
    chart("Slots", minutes, [{ label: "busy", class: "rendering", value: (m) => m.slotsBusy }, { label: "total", class: "total", value: (m) => m.slots }], { axis: "slots" }),
    chart("Render time", minutes, [{ label: "p50", class: "finished", value: (m) => m.renderP50 },
      { label: "p90", class: "cancelled", value: (m) => m.renderP90 }, { label: "p99", class: "error", value: (m) => m.renderP99 }], { unit: " s", axis: "s" }));
}

// replicasPanel shows the coordinator's replicas (with [ha]); a coordinator alone shows none.
function replicasPanel(status) {
  if (!status) return h("div");
  const rows = (status.replicas || []).map((r) => h("tr", { "data-replica": r.id },
    h("td", { class: "name mono" }, r.id, r.id === status.leader ? h("span", { class: "muted" }, " (leader)") : ""),
    h("td", { class: "mono muted" }, r.address),
    h("td", {}, badge(r.state || "unreachable")),
    h("td", {}, r.appliedIndex === null || r.appliedIndex === undefined ? "—" : String(r.appliedIndex)),
    h("td", { class: "muted" }, r.lastContact ? age(r.lastContact) : "")));
  return h("div", {}, h("h2", {}, "Replicas ", h("span", { class: "muted" }, `term ${status.term}, leader ${status.leader || "none"}`)),
    h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "Replica"), h("th", {}, "Address"),
      h("th", {}, "State"), h("th", {}, "Applied"), h("th", {}, "Last contact"))), h("tbody", {}, ...rows))));
}

function farmScreen() {
  const tbody = h("tbody");
  const charts = h("div");
  const replicas = h("div");
  if (!me || me.kind !== "admin") return teamFarmScreen();
  async function load() {
    const [nodes, history, cluster] = await Promise.all([api("GET", "/api/v2/nodes"), api("GET", "/api/v2/admin/history"),
      api("GET", "/api/v2/admin/cluster").catch(() => null)]);
    charts.replaceChildren(farmCharts(history.minutes));
    replicas.replaceChildren(replicasPanel(cluster));
    tbody.replaceChildren(...(nodes.length ? nodes.map((n) => {
      const busy = (n.currentJobs || []).length;
      const forget = (node) => h("button", { class: "quiet", onclick: async () => {
        if (!confirm(`Forget the node ${node.id}? Its records go; it may join again later.`)) return;
        try { await api("DELETE", `/api/v2/nodes/${encodeURIComponent(node.id)}`); load(); } catch (e) { toast(e.message); }
      } }, "forget");
      const act = (what) => h("button", { class: "quiet", onclick: async () => {
        try { await api("POST", `/api/v2/nodes/${encodeURIComponent(n.id)}/${what}`); load(); } catch (e) { toast(e.message); }
      } }, what);
      const labels = Object.entries(n.labels || {}).map(([k, v]) => `${k}=${v}`).join(", ");
      const m = n.machine;
      const machine = m ? `${m.os}/${m.arch}, ${m.cpus} CPUs${m.memoryBytes ? `, ${(m.memoryBytes / 2 ** 30).toFixed(1)} GiB` : ""}` : "—";
      // A draining node with nothing left to render is drained: it waits for its clear.
      const state = n.state === "draining" && busy === 0
        ? h("span", { class: "badge draining", "data-status": "drained" }, "drained") : badge(n.state);
      const rendering = (n.rendering || []).map((r) => h("div", {},
        h("a", { href: `/ui/jobs/${r.job}`, "data-link": true, title: r.job }, r.name || r.job),
        r.chunk !== undefined ? h("span", { class: "muted" }, ` chunk ${r.chunk + 1}`) : null));
      return h("tr", { "data-node": n.id },
        h("td", { class: "name mono", title: n.reason || "" }, n.id, n.reason ? h("div", { class: "muted" }, n.reason) : null), h("td", {}, state),
        h("td", { class: "machine" }, machine, h("div", { class: "muted" }, n.version || "")),
        h("td", {}, (n.engines || []).join(", ")), h("td", { "data-field": "pools" }, (n.pools || []).join(", ") || "—"), h("td", {}, `${busy} of ${n.slots}`),
        h("td", { class: "name", "data-field": "rendering" }, ...rendering),
        h("td", { class: "muted" }, labels),
        h("td", { class: "muted" }, n.lastHeartbeat ? age(n.lastHeartbeat) : ""),
        h("td", {}, ["lost", "left"].includes(n.state) ? forget(n) : n.state === "draining" || n.state === "quarantined" ? act("clear") : act("drain")));
    }) : [h("tr", {}, h("td", { colspan: "10", class: "empty" }, "No render node has joined."))]));
  }
  load().catch((e) => toast(e.message));
  // Node changes arrive as events; the charts and heartbeat ages are read again each 30 s.
  let soon = null;
  const stopEvents = onEvents((ev) => {
    if (ev.type === "node" || ev.type === "refresh") { clearTimeout(soon); soon = setTimeout(() => load().catch(() => {}), 200); }
  });
  const timer = setInterval(() => load().catch(() => {}), 30000);
  leaveScreen = () => { clearInterval(timer); stopEvents(); };
  return [h("h1", {}, "Farm", liveBadge()), charts, replicas,
    h("h2", {}, "Render nodes"),
    h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {}, ...["Node", "State", "Machine", "Engines", "Pools", "Slots busy",
      "Rendering", "Labels", "Heartbeat", ""].map((t) => h("th", {}, t)))), tbody))];
}

// hourlyRenderChart charts render time hour by hour since a time, a line per team (label, class,
// hours as the usage report gives them), in the unit its largest hour reads best in.
function hourlyRenderChart(title, since, teams) {
  const buckets = [];
  for (let at = since.getTime(); at <= Date.now(); at += 3600 * 1000) buckets.push(at);
  const most = Math.max(0, ...teams.flatMap((t) => t.hours.map((x) => x.renderSeconds)));
  const [per, unit] = most >= 7200 ? [3600, "h"] : most >= 120 ? [60, "min"] : [1, "s"];
  const series = teams.map((t) => {
    const byHour = new Map(t.hours.map((x) => [new Date(x.at).getTime(), x.renderSeconds / per]));
    return { label: t.label, class: t.class, value: (at) => byHour.get(at) || 0 };
  });
  return chart(title, buckets, series, { unit: ` ${unit}`, axis: unit, span: "last 24 hours", step: "h" });
}

// bytesText says a size: 12 KiB, 3.4 MiB, 1.2 GiB.
function bytesText(n) {
  return n >= 2 ** 30 ? `${(n / 2 ** 30).toFixed(1)} GiB` : n >= 2 ** 20 ? `${(n / 2 ** 20).toFixed(1)} MiB` : `${Math.round(n / 1024)} KiB`;
}

// teamFarmScreen shows a team what it has of the farm: the engines ready nodes offer now, its
// jobs rendering and waiting, and what it used over the last 24 hours, hour by hour.
function teamFarmScreen() {
  const now = h("section", { class: "panel", id: "team-now" }, h("p", { class: "muted" }, "…"));
  const used = h("section", { class: "panel", id: "team-usage" });
  const hourly = h("div", { id: "team-usage-chart", class: "charts" });
  const jobsText = (n) => (n === null ? "? jobs" : `${n} job${n === 1 ? "" : "s"}`);
  const countOf = async (states) => {
    const resp = await fetch(`/api/v2/jobs?minimal=true&limit=1&states=${states}`, { headers: { Authorization: `Bearer ${token}` } });
    return resp.ok ? Number(resp.headers.get("X-Total-Count") || 0) : null;
  };
  async function load() {
    const since = new Date(Date.now() - 23 * 3600 * 1000);
    since.setUTCMinutes(0, 0, 0);
    const [team, usage, rendering, waiting] = await Promise.all([api("GET", "/api/v2/team"), api("GET", `/api/v2/usage?from=${since.toISOString()}`),
      countOf("render:dorender"), countOf("queued,pending")]);
    now.replaceChildren(h("h2", {}, "Now"), h("dl", { class: "facts" },
      h("dt", {}, "Engines ready"), h("dd", { id: "team-engines" }, (team.engines || []).length ? team.engines.join(", ") : "none: no render node is ready"),
      h("dt", {}, "Rendering"), h("dd", {}, h("a", { href: "/ui/jobs?states=render:dorender", "data-link": true }, jobsText(rendering))),
      h("dt", {}, "Waiting"), h("dd", {}, h("a", { href: "/ui/jobs?states=queued,pending", "data-link": true }, jobsText(waiting)))));
    const mine = usage.teams[0] || { total: {}, engines: [], hours: [] };
    const t = mine.total;
    used.replaceChildren(h("h2", {}, "Used over the last 24 hours"),
      h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {}, ...["Engine", "Render time", "Frames", "Finished", "Failed", "Output"].map((x) => h("th", {}, x)))),
        h("tbody", {}, ...[...mine.engines.map((e) => ({ name: e.engine, u: e })), { name: "all", u: t }].map(({ name, u }) => h("tr", { "data-engine": name },
          h("td", { class: "name" }, name), h("td", { class: "num" }, seconds(u.renderSeconds || 0)), h("td", { class: "num" }, String(u.frames || 0)),
          h("td", { class: "num" }, String(u.jobsFinished || 0)), h("td", { class: "num" }, String(u.jobsFailed || 0)), h("td", { class: "num" }, bytesText(u.outputBytes || 0))))))));
    hourly.replaceChildren(hourlyRenderChart("Render time, each hour", since, [{ label: team.name, class: "team0", hours: mine.hours }]));
  }
  load().catch((e) => toast(e.message));
  const timer = setInterval(() => { if (!document.hidden) load().catch(() => {}); }, 30000);
  leaveScreen = () => clearInterval(timer);
  return [h("h1", {}, "Farm ", h("span", { class: "muted" }, `team ${me.name}`)), now, used, hourly];
}

// ---- routing ----

// teamsScreen shows the farm's admin each team: its policy (editable), what it holds of the farm
// now and waits for, and what it used over the last 24 hours, charted hour by hour.
function teamsScreen() {
  const tbody = h("tbody");
  const share = h("section", { class: "panel", id: "farm-share" });
  const usageChart = h("div", { id: "usage-chart", class: "charts" });
  const editor = h("div");
  const TEAM_COLOURS = 6;
  const hours = (sec) => (sec >= 3600 ? `${(sec / 3600).toFixed(1)} h` : sec >= 60 ? `${Math.round(sec / 60)} min` : `${Math.round(sec)} s`);
  const cap = (v) => (v === null || v === undefined ? "—" : String(v));
  async function load(stale) {
    const since = new Date(Date.now() - 23 * 3600 * 1000);
    since.setUTCMinutes(0, 0, 0);
    const fresh = stale ? "stale=true&" : "";
    const [teams, usage, tokens] = await Promise.all([api("GET", "/api/v2/admin/teams"),
      api("GET", `/api/v2/admin/usage?${fresh}from=${since.toISOString()}`), api("GET", `/api/v2/admin/tokens?${fresh}`)]);
    teams.sort((a, b) => a.name.localeCompare(b.name));
    const usageOf = new Map(usage.teams.map((u) => [u.team.id, u]));
    const live = new Map();
    for (const t of tokens) if (!t.expired) live.set(t.team.id, (live.get(t.team.id) || 0) + 1);
    const colour = new Map(teams.map((t, i) => [t.id, `team${i % TEAM_COLOURS}`]));

    const running = teams.reduce((n, t) => n + t.running, 0);
    const bar = h("div", { class: "stack", role: "img", "aria-label": teams.map((t) => `${t.name} ${t.running} slots`).join(", ") });
    for (const t of teams) {
      if (!t.running) continue;
      const seg = h("span", { class: `seg ${colour.get(t.id)}`, title: `${t.name}: ${t.running} slots` });
      seg.style.flexGrow = String(t.running);
      bar.append(seg);
    }
    share.replaceChildren(h("h2", {}, "The farm's slots now"), running ? bar : h("p", { class: "muted" }, "No render holds a slot."),
      h("p", { class: "legend" }, ...teams.map((t) => h("span", {}, h("span", { class: `dot ${colour.get(t.id)}` }), ` ${t.name} `,
        h("b", {}, `${t.running} (${Math.round((t.share || 0) * 100)}%)`)))));

    tbody.replaceChildren(...(teams.length ? teams.map((t) => {
      const p = t.policy;
      const u = (usageOf.get(t.id) || {}).total || {};
      return h("tr", { "data-team": t.name },
        h("td", { class: "name" }, h("a", { href: `/ui/jobs?team=${encodeURIComponent(t.name)}`, "data-link": true }, t.name)),
        h("td", { class: "num" }, String(live.get(t.id) || 0)),
        h("td", { class: "num", "data-field": "weight" }, String(p.weight)),
        h("td", { class: "num" }, String(p.guaranteedSlots)),
        h("td", { class: "num" }, cap(p.maxRunning)),
        h("td", { class: "num" }, `${cap(p.maxQueuedJobs)} / ${cap(p.maxQueuedChunks)}`),
        h("td", { class: "num" }, cap(p.maxPriority)),
        h("td", {}, p.pools ? p.pools.join(", ") || "none" : "any"),
        h("td", {}, p.limits ? p.limits.join(", ") || "none" : "any"),
        h("td", { class: "num" }, `${t.running} (${Math.round((t.share || 0) * 100)}%)`),
        h("td", { class: "num" }, `${t.queued.jobs} / ${t.queued.chunks}`),
        h("td", { class: "num" }, hours(u.renderSeconds || 0)),
        h("td", { class: "num" }, String(u.frames || 0)),
        h("td", { class: "num" }, `${u.jobsFinished || 0} / ${u.jobsFailed || 0}`),
        h("td", { class: "num" }, bytesText(u.outputBytes || 0)),
        h("td", {}, h("button", { class: "quiet", onclick: () => edit(t) }, "Edit")));
    }) : [h("tr", {}, h("td", { colspan: "16", class: "empty" }, "No team yet: framefarm token create --team NAME makes one."))]));

    usageChart.replaceChildren(hourlyRenderChart("Render time per team, each hour", since,
      teams.map((t) => ({ label: t.name, class: colour.get(t.id), hours: (usageOf.get(t.id) || {}).hours || [] }))));
  }
  // edit opens the team's policy in a form: an empty cap is no cap.
  function edit(t) {
    const p = t.policy;
    const lists = ["pools", "limits"];
    const field = (name, label, v, hint) => h("label", { class: "field" }, h("span", {}, label),
      h("input", { type: lists.includes(name) ? "text" : "number", name, value: v === null || v === undefined ? "" : Array.isArray(v) ? v.join(", ") : String(v),
        placeholder: hint, "aria-label": label, min: name === "weight" ? "1" : name === "maxPriority" ? undefined : "0" }));
    const form = h("form", { class: "panel", id: "policy-form", onsubmit: async (e) => {
      e.preventDefault();
      const change = {};
      for (const input of form.querySelectorAll("input")) {
        const text = input.value.trim();
        if (lists.includes(input.name)) change[input.name] = text === "" ? null : text.split(",").map((x) => x.trim()).filter(Boolean);
        else if (input.name === "weight" || input.name === "guaranteedSlots") change[input.name] = Number(text || (input.name === "weight" ? 1 : 0));
        else change[input.name] = text === "" ? null : Number(text);
      }
      try {
        await api("PATCH", `/api/v2/admin/teams/${encodeURIComponent(t.id)}`, change);
        toast(`${t.name}'s policy saved`);
        editor.replaceChildren();
        load();
      } catch (err) { toast(`not saved: ${err.message}`); }
    } }, h("h2", {}, `Policy of ${t.name}`),
    h("div", { class: "fields" },
      field("weight", "Weight", p.weight, "1"), field("guaranteedSlots", "Guaranteed slots", p.guaranteedSlots, "0"),
      field("maxRunning", "Max running", p.maxRunning, "no cap"), field("maxQueuedJobs", "Max queued jobs", p.maxQueuedJobs, "no cap"),
      field("maxQueuedChunks", "Max queued chunks", p.maxQueuedChunks, "no cap"), field("maxPriority", "Max priority", p.maxPriority, "no cap"),
      field("pools", "Pools it may name", p.pools, "any"), field("limits", "Limits it may name", p.limits, "any")),
    h("div", { class: "toolbar" }, h("button", { type: "submit" }, "Save"), h("button", { type: "button", class: "quiet", onclick: () => editor.replaceChildren() }, "Close"),
      h("span", { class: "muted" }, "Free slots go to teams by weight; a team below its guaranteed slots goes first. An empty cap is no cap.")));
    editor.replaceChildren(form);
    form.querySelector("input").focus();
  }
  load().catch((e) => toast(e.message));
  const timer = setInterval(() => { if (!document.hidden && !editor.firstChild) load(true).catch(() => {}); }, 10000);
  leaveScreen = () => clearInterval(timer);
  return [h("h1", {}, "Teams"), share, editor,
    h("div", { class: "table-wrap" }, h("table", { id: "teams" }, h("thead", {}, h("tr", {}, ...["Team", "Tokens", "Weight", "Guaranteed", "Max running",
      "Max queued (jobs / chunks)", "Max priority", "Pools", "Limits", "Running (share)", "Queued (jobs / chunks)", "Render time, 24 h", "Frames", "Finished / failed", "Output", ""]
      .map((x) => h("th", {}, x)))), tbody)),
    usageChart];
}

function screenFor(path) {
  const parts = path.replace(/^\/ui\/?/, "").split("/").filter(Boolean);
  if (!me) return ["signin", signInScreen()];
  // The admin's token reads every team's jobs, not their templates, batches or libraries.
  const elsewhere = (me.kind === "admin" && ["templates", "library", "batches"].includes(parts[0])) || (me.kind !== "admin" && parts[0] === "teams");
  if (elsewhere) {
    history.replaceState(null, "", "/ui/jobs");
    return ["jobs", jobsScreen()];
  }
  switch (parts[0]) {
    case "teams": return ["teams", teamsScreen()];
    case "jobs": return parts[1] ? ["jobs", jobScreen(parts[1])] : ["jobs", jobsScreen()];
    case "templates": return parts[1] ? ["templates", templateScreen(parts[1])] : ["templates", templatesScreen()];
    case "batches": return parts[1] ? ["batches", batchScreen(parts[1])] : ["batches", batchesScreen()];
    case "library": return ["library", libraryScreen()];
    case "farm": return ["farm", farmScreen()];
    default: return me.kind === "admin" ? ["farm", farmScreen()] : ["jobs", jobsScreen()];
  }
}

function show() {
  leaveScreen();
  leaveScreen = () => {};
  const [name, nodes] = screenFor(location.pathname);
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.screen === name);
  render(...[].concat(nodes));
  document.title = `framefarm · ${name}`;
}

function navigate(path) {
  history.pushState(null, "", path);
  show();
}

document.addEventListener("click", (e) => {
  const a = e.target.closest("a[data-link]");
  if (!a || e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
  e.preventDefault();
  navigate(a.getAttribute("href"));
});
window.addEventListener("popstate", show);
// A sign-in link pasted into a tab already on the dashboard changes only the fragment: the page
// is not loaded again, so the new token is taken here, and the page starts over with it.
window.addEventListener("hashchange", () => {
  const fromLink = new URLSearchParams(location.hash.slice(1)).get("token");
  if (!fromLink) return;
  localStorage.setItem(TOKEN_KEY, fromLink);
  history.replaceState(null, "", location.pathname + location.search);
  location.reload();
});
document.getElementById("signout").addEventListener("click", signOut);

// A link with #token=... signs in; the fragment never reaches the server, and is cleared at once.
async function start() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const fromLink = fragment.get("token");
  if (fromLink) {
    history.replaceState(null, "", location.pathname + location.search);
    token = fromLink;
  }
  if (token) {
    try { await signIn(token); } catch (e) { render(signInScreen(e.message)); return; }
  }
  show();
}

start();
