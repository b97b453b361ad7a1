// The playground's page: the question editor, the Decide call to this server, and what it answered.
// Everything is drawn with DOM calls (no innerHTML, no inline style), under a policy that allows
// scripts, styles and connections from this server only. The form model below is the source of
// truth: inputs write into it, and the snippets are rewritten from it on every change.
"use strict";

(function () {
  const wire = window.PlaygroundWire;
  const root = document.getElementById("playground");
  const example = JSON.parse(root.dataset.example);
  const keyField = document.getElementById("api-key"); // absent when the server needs no key
  const form = {
    model: example.model,
    stateText: JSON.stringify(example.state, null, 2),
    questions: wire.questionsFromSystemOne(example.questions),
  };
  const DEFAULTS = {
    choice: () => [{ name: "yes", description: "" }, { name: "no", description: "" }],
    score: () => ["Low", "Medium", "High"],
  };
  let uid = 0;
  let calls = 0; // only the latest Decide is drawn

  function h(tag, props = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props)) {
      if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (key in node && !key.includes("-")) node[key] = value;
      else node.setAttribute(key, value);
    }
    node.append(...children.filter((child) => child !== null));
    return node;
  }

  function byId(id) {
    return document.getElementById(id);
  }

  function contract() {
    const checked = document.querySelector('input[name="contract"]:checked');
    return { name: checked.value, path: checked.dataset.path };
  }

  function field(text, input) {
    input.id = `f${++uid}`;
    return h("span", { className: "field" }, h("label", { htmlFor: input.id }, text), input);
  }

  function textInput(value, onChange, props = {}) {
    return h("input", { value, spellcheck: false, oninput: (e) => { onChange(e.target.value); refresh(); }, ...props });
  }

  function removeButton(text, onClick) {
    return h("button", { type: "button", className: "remove", onclick: () => { onClick(); renderQuestions(); } }, text);
  }

  function optionRows(q) {
    const rows = q.options.map((option, i) => h("li", {},
      textInput(option.name, (v) => { option.name = v; }, { "aria-label": `Option ${i + 1} name`, className: "name" }),
      textInput(option.description, (v) => { option.description = v; }, {
        "aria-label": `Option ${i + 1} description`, placeholder: "description (optional)",
      }),
      removeButton("Remove option", () => q.options.splice(i, 1)),
    ));
    const add = () => { q.options.push({ name: `option${q.options.length + 1}`, description: "" }); renderQuestions(); };
    return [h("ol", { className: "options" }, ...rows), h("button", { type: "button", onclick: add }, "Add option")];
  }

  function levelRows(q) {
    const rows = q.levels.map((level, i) => h("li", {},
      textInput(level, (v) => { q.levels[i] = v; }, { "aria-label": `Level ${i}`, className: "level" }),
      removeButton("Remove level", () => q.levels.splice(i, 1)),
    ));
    const add = () => { q.levels.push(`Level ${q.levels.length}`); renderQuestions(); };
    return [h("ol", { className: "levels", start: 0 }, ...rows), h("button", { type: "button", onclick: add }, "Add level")];
  }

  function changeKind(q, kind) {
    q.kind = kind;
    if (kind === "choice" && q.options.length === 0) q.options = DEFAULTS.choice();
    if (kind === "score" && q.levels.length === 0) q.levels = DEFAULTS.score();
    renderQuestions();
  }

  function questionEditor(q, index) {
    const kind = h("select", { onchange: (e) => changeKind(q, e.target.value) },
      ...Object.entries(wire.KINDS).map(([value, text]) => h("option", { value, selected: value === q.kind }, text)));
    const body = q.kind === "choice" ? optionRows(q) : q.kind === "score" ? levelRows(q) : [];
    return h("fieldset", { className: "question", "data-kind": q.kind },
      h("legend", {}, `Question ${index + 1}`),
      h("div", { className: "row" },
        field("Name", textInput(q.id, (v) => { q.id = v; }, { className: "name" })),
        field("Type", kind),
        removeButton("Remove question", () => form.questions.splice(index, 1))),
      field("Instructions", textInput(q.instructions, (v) => { q.instructions = v; }, { className: "instructions" })),
      ...body);
  }

  function renderQuestions() {
    byId("question-list").replaceChildren(...form.questions.map(questionEditor));
    refresh();
  }

  function addQuestion(kind) {
    const taken = new Set(form.questions.map((q) => q.id));
    let n = form.questions.length + 1;
    while (taken.has(`q${n}`)) n += 1;
    const options = kind === "choice" ? DEFAULTS.choice() : [];
    const levels = kind === "score" ? DEFAULTS.score() : [];
    form.questions.push({ id: `q${n}`, kind, instructions: "", options, levels });
    renderQuestions();
    const inputs = byId("question-list").querySelectorAll("input.instructions");
    inputs[inputs.length - 1].focus();
  }

  // The state's reading, the notes and the snippets, from the form as it is now.
  function refresh() {
    const state = wire.readState(form.stateText);
    const notes = wire.formNotes(form);
    byId("state-reading").textContent = [wire.describeState(state), ...notes].join(" ");
    const { name, path } = contract();
    const body = wire.requestBody(name, form);
    const keyed = keyField !== null;
    byId("snippet-curl").textContent = wire.curl(location.origin + path, body, keyed);
    byId("snippet-python").textContent = wire.pythonSnippet(name, location.origin, body, keyed);
    byId("snippet-python-title").textContent = name === "decisions" ? "Python (OpenAI SDK)" : "Python (TypeSafe SDK)";
  }

  function showResult(state, ...children) {
    const result = byId("result");
    result.dataset.state = state;
    result.replaceChildren(...children);
    return result;
  }

  function percent(p) {
    return `${(100 * p).toFixed(1)} %`;
  }

  function answerCard(row) {
    const options = row.options.map((option) => {
      const id = `m${++uid}`;
      return h("li", {},
        h("label", { htmlFor: id }, option.label),
        h("meter", { id, min: 0, max: 1, value: option.probability, title: String(option.probability) }, percent(option.probability)),
        h("span", { className: "value" }, percent(option.probability)));
    });
    const confidence = row.confidence === null ? "none for this kind" : row.confidence.toFixed(3);
    return h("article", { className: "answer", "data-question": row.name },
      h("h3", {}, row.name, " ", h("span", { className: "kind" }, row.kind)),
      h("p", {}, "Answer: ", h("strong", { className: "answer-value" }, row.answer),
        " · Confidence: ", h("strong", { className: "confidence" }, confidence)),
      h("ul", { className: "probabilities" }, ...options));
  }

  function showAnswers(call, response, body, elapsed) {
    const header = (name) => response.headers.get(name);
    const timing = wire.serverTiming(header("server-timing"));
    const rows = [
      ["Latency", `${elapsed.toFixed(1)} ms (round trip from this page)`],
      ...(timing ? [["Server time", timing]] : []),
      ...wire.usageRows(call.name, body, header),
      ["Model", String(body.model)],
      ["Request id", header("x-request-id") || header("x-typesafe-request-id") || "none"],
    ];
    const usage = h("dl", { className: "usage" }, ...rows.flatMap(([term, value]) => [h("dt", {}, term), h("dd", {}, value)]));
    const result = showResult("ok",
      h("p", { className: "status ok" }, `${wire.statusLine(response.status, response.statusText)} · POST ${call.path}`),
      usage,
      h("div", { className: "answers" }, ...wire.answerRows(call.name, body).map(answerCard)));
    result.dataset.status = String(response.status);
  }

  function showError(call, response, text) {
    let shown = text;
    try {
      shown = JSON.stringify(JSON.parse(text), null, 2);
    } catch {
      // not JSON: shown as it came
    }
    const result = showResult("error", h("div", { className: "error", role: "alert" },
      h("p", { className: "status" }, `${wire.statusLine(response.status, response.statusText)} · POST ${call.path}`),
      h("p", {}, response.ok ? "The answer is not the JSON expected:" : "The server refused the request; its answer:"),
      h("pre", { className: "error-body" }, shown || "(an empty body)")));
    result.dataset.status = String(response.status);
  }

  function showNetworkError(call, error) {
    const result = showResult("error", h("div", { className: "error", role: "alert" },
      h("p", { className: "status" }, `Network error · POST ${call.path}`),
      h("p", {}, `No answer from the server (${error.name}: ${error.message}). Is it still running, and reachable from this browser?`)));
    result.dataset.status = "network";
  }

  async function decide(event) {
    event.preventDefault();
    const call = contract();
    const mine = ++calls;
    const headers = { "Content-Type": "application/json" };
    const key = keyField ? keyField.value.trim() : "";
    if (key) headers.Authorization = `Bearer ${key}`;
    const body = JSON.stringify(wire.requestBody(call.name, form));
    showResult("pending", h("p", { className: "status" }, `Deciding · POST ${call.path}…`)).dataset.status = "";
    const started = performance.now();
    let response;
    let text;
    try {
      response = await fetch(call.path, { method: "POST", headers, body, cache: "no-store", credentials: "omit" });
      text = await response.text();
    } catch (error) {
      if (mine === calls) showNetworkError(call, error);
      return;
    }
    const elapsed = performance.now() - started;
    if (mine !== calls) return;
    let parsed = null;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = null;
    }
    if (!response.ok || parsed === null) {
      showError(call, response, text);
      return;
    }
    try {
      showAnswers(call, response, parsed, elapsed);
    } catch {
      showError(call, response, text); // a 2xx body of another shape: shown as it came
    }
  }

  async function copy(event) {
    const button = event.target;
    const source = byId(button.dataset.copy);
    try {
      await navigator.clipboard.writeText(source.textContent);
      button.textContent = "Copied";
    } catch {
      getSelection().selectAllChildren(source); // no clipboard (a page not served over https): select it
      button.textContent = "Selected: press Ctrl+C";
    }
    setTimeout(() => { button.textContent = "Copy"; }, 2000);
  }

  function start() {
    if (!document.querySelector('input[name="contract"]')) {
      showResult("error", h("p", { className: "error" }, "This server serves neither System One nor Decisions: nothing to ask."));
      return;
    }
    const model = byId("model");
    const state = byId("state");
    model.value = form.model;
    state.value = form.stateText;
    model.addEventListener("input", () => { form.model = model.value; refresh(); });
    state.addEventListener("input", () => { form.stateText = state.value; refresh(); });
    for (const radio of document.querySelectorAll('input[name="contract"]')) radio.addEventListener("change", refresh);
    for (const button of document.querySelectorAll("button[data-add]")) {
      button.addEventListener("click", () => addQuestion(button.dataset.add));
    }
    for (const button of document.querySelectorAll("button[data-copy]")) button.addEventListener("click", copy);
    byId("decision").addEventListener("submit", decide);
    renderQuestions();
    root.dataset.ready = "true";
  }

  start();
})();
