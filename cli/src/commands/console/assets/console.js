// Registry Coordinator console: auto-refresh and the recovery actions.
// Strings from the service are written with textContent, never as HTML.
"use strict";

(function () {
  var body = document.body;
  var refresh = body.getAttribute("data-refresh");
  var box = document.getElementById("auto-refresh");
  if (refresh && box) {
    setInterval(function () {
      var typing = document.activeElement && document.activeElement.tagName === "INPUT" &&
        document.activeElement !== box;
      if (box.checked && !typing && !body.classList.contains("busy")) {
        location.reload();
      }
    }, Number(refresh) * 1000);
  }

  var meta = document.querySelector('meta[name="console-secret"]');
  var secret = meta ? meta.getAttribute("content") : "";
  var result = document.getElementById("action-result");

  function show(kind, lines) {
    if (!result) return;
    result.className = kind;
    result.textContent = "";
    lines.forEach(function (line) {
      var p = document.createElement("p");
      p.textContent = line;
      result.appendChild(p);
    });
  }

  document.querySelectorAll("form.action").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var reason = form.elements.reason.value;
      body.classList.add("busy");
      show("pending", [form.querySelector("button").textContent + " …"]);
      fetch(form.getAttribute("data-endpoint"), {
        method: "POST",
        credentials: "same-origin",
        headers: { "content-type": "application/json", "x-console-secret": secret },
        body: JSON.stringify({ reason: reason })
      }).then(function (response) {
        return response.text().then(function (text) {
          var doc = null;
          try { doc = JSON.parse(text); } catch (e) { doc = null; }
          if (response.ok && doc) {
            show("ok", ["done: the run is " + doc.state + (doc.outcome ? " (" + doc.outcome + ")" : "")]);
            setTimeout(function () { location.reload(); }, 600);
          } else if (doc && doc.code) {
            body.classList.remove("busy");
            show("refused", [
              "refused: " + doc.status + " " + doc.title,
              "code: coordinator." + doc.code,
              doc.detail || ""
            ]);
          } else {
            body.classList.remove("busy");
            show("refused", ["refused: HTTP " + response.status]);
          }
        });
      }).catch(function (error) {
        body.classList.remove("busy");
        show("refused", ["the console did not answer: " + error]);
      });
    });
  });
})();
