"use strict";
(function () {
  var choices = document.getElementById("choices");
  var reason = document.getElementById("reason");
  var buttons = Array.prototype.slice.call(document.querySelectorAll("button[data-decision]"));
  var panels = Array.prototype.slice.call(document.querySelectorAll("[data-outcome]"));

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
    if (status === 403) return "forbidden";
    if (status !== 200 || answer === null || typeof answer !== "object") return "error";
    if (answer.resolved === true) {
      if (batch) return "allowed-all";
      if (body.decision === "deny") return "denied";
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
    if (outcome === "error") enable(true);
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
      if (body.decision === "deny" && reason && reason.value.trim() !== "") {
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
