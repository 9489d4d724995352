"use strict";
(function () {
  var choices = document.getElementById("choices");
  var reason = document.getElementById("reason");
  var edited = document.getElementById("edited");
  var editPanel = document.getElementById("edit-panel");
  // The inbox's "Edit and allow" opens the edit panel.
  if (editPanel && location.hash === "#edit") editPanel.open = true;
  var buttons = Array.prototype.slice.call(document.querySelectorAll("button[data-decision]"));
  var panels = Array.prototype.slice.call(document.querySelectorAll("[data-outcome]"));
  var refusal = panels.filter(function (panel) {
    return panel.getAttribute("data-outcome") === "refused";
  })[0];

  function show(outcome) {
    panels.forEach(function (panel) {
      panel.hidden = panel.getAttribute("data-outcome") !== outcome;
    });
  }

  function enable(enabled) {
    buttons.forEach(function (button) {
      button.disabled = !enabled;
    });
  }

  // The answer is {resolved, not_held?, releasing?, unknown?}; 410 and 403
  // come from the link itself.
  function outcomeOf(status, answer, body, batch) {
    if (status === 410) return "gone";
    if (status === 400 && body.decision === "edit") {
      if (refusal && answer && answer.error && typeof answer.error.message === "string") {
        refusal.textContent = "The edit was refused, and the call is still waiting: " + answer.error.message;
      }
      return "refused";
    }
    if (status === 403) return "forbidden";
    if (status !== 200 || answer === null || typeof answer !== "object") return "error";
    if (answer.resolved === true) {
      if (batch) return "allowed-all";
      if (body.decision === "deny") return "denied";
      if (body.decision === "edit") return "edited";
      if (body.remember_prefix === true) return "allowed-prefix";
      if (body.remember === true) return "allowed-remember";
      return "allowed";
    }
    if (answer.not_held === true) return "not-held";
    if (answer.releasing === true) return "running";
    if (answer.unknown === true) return "unknown";
    return "unchanged";
  }

  function settle(outcome) {
    show(outcome);
    if (outcome === "error" || outcome === "refused" || outcome === "bad-json") enable(true);
    else choices.hidden = true;
  }

  buttons.forEach(function (button) {
    button.addEventListener("click", function () {
      var body = { decision: button.getAttribute("data-decision") };
      // "Allow all": its own token, which names exactly the calls listed.
      var batch = button.getAttribute("data-batch");
      var scope = button.getAttribute("data-scope");
      if (scope) body.grant_scope = scope;
      if (button.getAttribute("data-remember") === "true") body.remember = true;
      if (button.getAttribute("data-remember-prefix") === "true") body.remember_prefix = true;
      if (body.decision === "edit") {
        var parsed = null;
        try {
          parsed = JSON.parse(edited ? edited.value : "");
        } catch (e) {
          parsed = null;
        }
        if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
          show("bad-json");
          return;
        }
        body.arguments = parsed;
        var ttl = document.getElementById("edit-ttl");
        if (ttl && ttl.value) body.ttl_ms = parseInt(ttl.value, 10);
      }
      if ((body.decision === "deny" || body.decision === "edit") && reason && reason.value.trim() !== "") {
        body.reason = reason.value.trim();
      }
      enable(false);
      show("sending");
      // The page's own path: its token is never repeated in the document.
      var path = batch ? location.pathname.replace(/[^\/]*$/, batch) : location.pathname;
      fetch(path, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
        credentials: "omit",
        cache: "no-store",
        redirect: "error"
      }).then(function (response) {
        return response.json().then(null, function () {
          return null;
        }).then(function (answer) {
          settle(outcomeOf(response.status, answer, body, batch));
        });
      }, function () {
        settle("error");
      });
    });
  });
})();
