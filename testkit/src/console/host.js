// The console host double's page (see host.rs): loads every extension the
// console double holds, calls each script's setup(host), and renders what
// they register inside their scope and an error boundary.
//
//   #/config/<configuration id>  the registered form over the stored value
//                                (read raw: templates as stored), Save
//   #/ext/<page id>              a registered page
//   #/chat/<session id>          a chat header with the session chips
//
// window.__host is what the test reads: ready, errors, crashes, the forms,
// pages and chips registered, the form's draft, what was saved; and
// setValue(v) to give the form a value the engine would not store.

import { Component, createElement as h, useEffect, useState, useSyncExternalStore } from "react";
import { createRoot } from "react-dom/client";

const state = {
  ready: false,
  loaded: [],
  errors: [],
  crashes: [],
  forms: [],
  pages: [],
  chips: [],
  draft: undefined,
  saved: undefined,
  saveError: null,
  setValue: null,
};
window.__host = state;

const browserId = `tab-${Math.random().toString(36).slice(2, 10)}`;

async function postJson(path, body) {
  const answer = await fetch(path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return answer.json();
}

// Bindings are made in the order asked, so a handler exists before the
// binding that names it.
let ordered = Promise.resolve();
function inOrder(path, body) {
  const run = ordered.then(() => postJson(path, body));
  ordered = run.catch(() => undefined);
  return run;
}

const handlers = new Map();

const iii = {
  browserId,
  async trigger(functionId, payload, options) {
    const answer = await postJson("/bridge/trigger", {
      function_id: functionId,
      payload: payload ?? {},
      timeout_ms: options?.timeoutMs,
    });
    if (answer.error) {
      const error = new Error(answer.error.message);
      error.code = answer.error.code;
      throw error;
    }
    return answer.result;
  },
  on(functionId, handler) {
    handlers.set(functionId, handler);
    inOrder("/bridge/on", { function_id: functionId });
    return () => {
      if (handlers.get(functionId) !== handler) return;
      handlers.delete(functionId);
      inOrder("/bridge/off", { function_id: functionId });
    };
  },
  registerTrigger({ type, function_id, config }) {
    const made = inOrder("/bridge/register-trigger", { type, function_id, config: config ?? {} });
    let done = false;
    return () => {
      if (done) return;
      done = true;
      made.then((answer) => answer?.id && inOrder("/bridge/unregister-trigger", { id: answer.id }));
    };
  },
  addConnectionStateListener() {
    return () => undefined;
  },
};

// Events for the page's handlers, by long poll, for as long as the tab lives.
async function pump() {
  let after = 0;
  for (;;) {
    try {
      const answer = await fetch(`/bridge/events?after=${after}`).then((r) => r.json());
      for (const event of answer.events ?? []) {
        after = Math.max(after, event.seq);
        const handler = handlers.get(event.function_id);
        if (!handler) continue;
        try {
          handler(event.payload);
        } catch (error) {
          state.errors.push(`handler ${event.function_id}: ${error?.message ?? error}`);
        }
      }
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

// The registries the extensions fill.
const registry = { forms: new Map(), pages: new Map(), chips: new Map() };
let version = 0;
const listeners = new Set();
function changed() {
  version += 1;
  state.forms = [...registry.forms.keys()];
  state.pages = [...registry.pages.keys()];
  state.chips = [...registry.chips.keys()];
  for (const listener of listeners) listener();
}
function useRegistry() {
  return useSyncExternalStore(
    (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    () => version,
  );
}

function adder(map, key, entry) {
  map.set(key, entry);
  changed();
  return () => {
    if (map.get(key) !== entry) return;
    map.delete(key);
    changed();
  };
}

function hostFor(path) {
  return {
    iii,
    path,
    configForms: {
      register: (id, component, options) => adder(registry.forms, id, { component, options, path }),
    },
    pages: {
      register: (page) => adder(registry.pages, page.id, { ...page, path }),
    },
    chat: {
      registerSessionChip: (chip) => adder(registry.chips, chip.id, { ...chip, path }),
    },
    useTheme: () => "light",
  };
}

class Boundary extends Component {
  constructor(props) {
    super(props);
    this.state = { failed: null };
  }
  static getDerivedStateFromError(failed) {
    return { failed };
  }
  componentDidCatch(error) {
    state.crashes.push(`${this.props.path}: ${error?.message ?? error}`);
  }
  render() {
    if (this.state.failed) return h("span", { className: "host-crash" }, `extension crashed · ${this.props.path}`);
    return this.props.children;
  }
}

function Scoped({ path, children }) {
  return h("div", { "data-iii-ui": path.split("/")[0], style: { display: "contents" } }, h(Boundary, { path }, children));
}

function ConfigView({ id }) {
  useRegistry();
  const form = registry.forms.get(id);
  const [stored, setStored] = useState(null);
  const [draft, setDraft] = useState(undefined);
  const [status, setStatus] = useState("");
  useEffect(() => {
    let live = true;
    (async () => {
      let schema = null;
      try {
        schema = (await iii.trigger("configuration::schema", { id }))?.schema ?? null;
      } catch {
        schema = null;
      }
      try {
        const got = await iii.trigger("configuration::get", { id, raw: true });
        if (live) {
          setStored({ value: got?.value ?? null, schema });
          setDraft(got?.value ?? null);
          state.draft = got?.value ?? null;
        }
      } catch (error) {
        if (live) setStatus(`could not read ${id}: ${error.message}`);
      }
    })();
    state.setValue = (value) => {
      setStored((s) => ({ value, schema: s?.schema ?? null }));
      setDraft(value);
      state.draft = value;
    };
    return () => {
      live = false;
    };
  }, [id]);
  const onChange = (next) => {
    state.draft = next;
    setDraft(next);
  };
  const save = async () => {
    setStatus("saving");
    try {
      await iii.trigger("configuration::set", { id, value: draft });
      state.saved = draft;
      state.saveError = null;
      setStatus("saved");
    } catch (error) {
      state.saveError = error.message;
      setStatus(`not saved: ${error.message}`);
    }
  };
  if (!form) return h("p", null, `No form is registered for ${id}.`);
  if (!stored) return h("p", null, status || "Loading…");
  return h(
    "div",
    null,
    h(Scoped, { path: form.path }, h(form.component, { id, schema: stored.schema, value: draft, onChange, errors: new Map(), focusField: undefined })),
    h(
      "div",
      { className: "host-save" },
      h("button", { id: "host-save", type: "button", onClick: save }, "Save"),
      h("span", { id: "host-save-status" }, status),
    ),
  );
}

function PageRender({ page }) {
  return page.render({ panelSide: "left", tabId: "host-tab" });
}

function PageView({ id }) {
  useRegistry();
  const page = registry.pages.get(id);
  if (!page) return h("p", null, `No page ${id}.`);
  return h(Scoped, { path: page.path }, h(PageRender, { page }));
}

function ChipRender({ chip, sessionId }) {
  return chip.render({ sessionId });
}

function ChatView({ sessionId }) {
  useRegistry();
  return h(
    "div",
    { className: "host-bar", id: "host-chat" },
    h("strong", null, `Chat ${sessionId}`),
    h(
      "span",
      { className: "host-chips" },
      [...registry.chips.values()].map((chip) => h(Scoped, { key: chip.id, path: chip.path }, h(ChipRender, { chip, sessionId }))),
    ),
  );
}

function useHash() {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const on = () => setHash(location.hash);
    window.addEventListener("hashchange", on);
    return () => window.removeEventListener("hashchange", on);
  }, []);
  return hash;
}

function App() {
  useRegistry();
  const hash = useHash();
  const [, kind, ...rest] = hash.split("/");
  const id = decodeURIComponent(rest.join("/"));
  let view = h("p", null, "Pick a view.");
  if (!state.ready) view = h("p", null, "Loading extensions…");
  else if (kind === "config") view = h(ConfigView, { key: id, id });
  else if (kind === "ext") view = h(PageView, { key: id, id });
  else if (kind === "chat") view = h(ChatView, { key: id, sessionId: id });
  return h("div", null, view);
}

async function loadAssets() {
  const manifest = await fetch("/ui-manifest").then((r) => r.json());
  const assets = manifest.assets ?? [];
  for (const asset of assets.filter((a) => a.kind === "style")) {
    const link = document.createElement("link");
    link.rel = "stylesheet";
    link.href = `/ui/${asset.path}?v=${asset.seq}`;
    document.head.appendChild(link);
  }
  for (const asset of assets.filter((a) => a.kind === "script")) {
    try {
      const module = await import(`/ui/${asset.path}?v=${asset.seq}`);
      if (typeof module.default !== "function") throw new Error("no default export");
      module.default(hostFor(asset.path));
      state.loaded.push(asset.path);
    } catch (error) {
      state.errors.push(`${asset.path}: ${error?.message ?? error}`);
      console.error("[iii-ui]", error);
    }
  }
  state.ready = true;
  changed();
}

createRoot(document.getElementById("root")).render(h(App));
pump();
loadAssets();
