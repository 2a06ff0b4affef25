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
      var picking = document.querySelector("input.pick:checked, #pick-all-matching:checked");
      if (box.checked && !typing && !picking && !body.classList.contains("busy")) {
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

  // The Moves page: a certificate uploaded is read by the console, which
  // keeps it and names it; the page then opens with it. The move posts
  // each listed run's move (at most ten a second) and sums up the
  // answers by result and problem code.
  function say(where, kind, texts) {
    where.className = kind;
    where.textContent = "";
    texts.forEach(function (line) {
      var p = document.createElement("p");
      p.textContent = line;
      where.appendChild(p);
    });
  }

  var upload = document.getElementById("certificate-upload");
  if (upload) {
    upload.addEventListener("submit", function (event) {
      event.preventDefault();
      var out = document.getElementById("certificate-result");
      var file = document.getElementById("certificate-file").files[0];
      if (!file) { say(out, "refused", ["choose the certificate's file first"]); return; }
      file.text().then(function (text) {
        return fetch(upload.getAttribute("data-endpoint"), {
          method: "POST",
          credentials: "same-origin",
          headers: { "content-type": "application/json", "x-console-secret": secret },
          body: text
        });
      }).then(function (response) {
        return response.json().then(function (doc) {
          if (response.ok && doc.certificate) {
            location.assign(upload.getAttribute("data-page") + "?certificate=" + encodeURIComponent(doc.certificate));
          } else {
            say(out, "refused", ["refused: coordinator." + doc.code, doc.detail || ""]);
          }
        });
      }).catch(function (error) { say(out, "refused", ["the console did not answer: " + error]); });
    });
  }

  var moveForm = document.getElementById("move");
  if (moveForm) {
    moveForm.addEventListener("submit", function (event) {
      event.preventDefault();
      var out = document.getElementById("move-result");
      var ids = (moveForm.getAttribute("data-runs") || "").split(" ").filter(Boolean);
      var reason = moveForm.elements.reason.value;
      if (!confirm("Move " + ids.length + " run(s) to revision B (" + reason + ")?")) return;
      body.classList.add("busy");
      var counts = {};
      var i = 0;
      function next() {
        if (i >= ids.length) {
          body.classList.remove("busy");
          say(out, "ok", ["done: " + ids.length].concat(Object.keys(counts).sort().map(function (k) {
            return k + ": " + counts[k];
          })));
          return;
        }
        var id = ids[i++];
        say(out, "pending", ["moving " + i + " of " + ids.length + " …"]);
        fetch(moveForm.getAttribute("data-endpoint") + encodeURIComponent(id), {
          method: "POST",
          credentials: "same-origin",
          headers: { "content-type": "application/json", "x-console-secret": secret },
          body: JSON.stringify({ reason: reason })
        }).then(function (response) {
          return response.json().then(function (doc) {
            var key = response.ok ? "moved" : "skipped coordinator." + doc.code;
            counts[key] = (counts[key] || 0) + 1;
          });
        }).catch(function () {
          counts["not answered"] = (counts["not answered"] || 0) + 1;
        }).then(function () { setTimeout(next, 100); });
      }
      next();
    });
  }

  // The bulk actions of the Runs page: the selected runs, or every run
  // matching the filter; confirmed, then one single-run action a run that
  // takes it (at most ten a second), with progress and a summary.
  var bulk = document.getElementById("bulk");
  if (!bulk) return;
  var picks = Array.prototype.slice.call(document.querySelectorAll("input.pick"));
  var pickPage = document.getElementById("pick-page");
  var allMatching = document.getElementById("pick-all-matching");
  var selectedText = document.getElementById("bulk-selected");
  var bulkResult = document.getElementById("bulk-result");
  var noLongerNeeded = (bulk.getAttribute("data-no-longer-needed") || "").split(" ");

  function lines(kind, texts) {
    bulkResult.className = kind;
    bulkResult.textContent = "";
    texts.forEach(function (line) {
      var p = document.createElement("p");
      p.textContent = line;
      bulkResult.appendChild(p);
    });
  }

  function selection() {
    return picks.filter(function (p) { return p.checked; }).map(function (p) {
      return { run: p.value, takes: (p.getAttribute("data-takes") || "").split(" ") };
    });
  }

  function update() {
    selectedText.textContent = allMatching && allMatching.checked
      ? "every run matching the filter"
      : selection().length + " selected";
  }
  picks.forEach(function (p) { p.addEventListener("change", update); });
  if (allMatching) allMatching.addEventListener("change", update);
  if (pickPage) {
    pickPage.addEventListener("change", function () {
      picks.forEach(function (p) { p.checked = pickPage.checked; });
      update();
    });
  }

  function runs() {
    if (!(allMatching && allMatching.checked)) return Promise.resolve(selection());
    return fetch(bulk.getAttribute("data-matching"), { credentials: "same-origin" })
      .then(function (response) {
        return response.json().then(function (doc) {
          if (!response.ok) throw doc;
          return doc.runs;
        });
      });
  }

  function act(action, reason, run) {
    return fetch(bulk.getAttribute("data-endpoint") + encodeURIComponent(run) + "/" + action, {
      method: "POST",
      credentials: "same-origin",
      headers: { "content-type": "application/json", "x-console-secret": secret },
      body: JSON.stringify({ reason: reason })
    }).then(function (response) {
      return response.text().then(function (text) {
        var doc = null;
        try { doc = JSON.parse(text); } catch (e) { doc = null; }
        if (response.ok && doc) return "done";
        if (doc && doc.code) {
          var kind = noLongerNeeded.indexOf(doc.code) >= 0 ? "skipped" : "refused";
          return kind + " coordinator." + doc.code;
        }
        return "refused HTTP " + response.status;
      });
    }, function () { return "failed: the console did not answer"; });
  }

  function summary(counts) {
    return Object.keys(counts).sort().map(function (k) { return k + ": " + counts[k]; });
  }

  bulk.addEventListener("submit", function (event) {
    event.preventDefault();
    var action = event.submitter ? event.submitter.value : "";
    var reason = bulk.elements.reason.value;
    runs().then(function (all) {
      var todo = all.filter(function (r) { return r.takes.indexOf(action) >= 0; });
      var counts = {};
      if (all.length > todo.length) counts["skipped (state)"] = all.length - todo.length;
      if (!todo.length) {
        lines("refused", ["no selected run takes " + action].concat(summary(counts)));
        return;
      }
      if (!window.confirm(action + " " + todo.length + " runs, each audited with reason " + reason + "?")) {
        lines("refused", ["not confirmed: nothing was done"]);
        return;
      }
      body.classList.add("busy");
      var i = 0;
      (function next() {
        if (i >= todo.length) {
          body.classList.remove("busy");
          lines("ok", [action + ": " + todo.length + " runs handled"].concat(summary(counts)));
          return;
        }
        var run = todo[i++];
        var began = Date.now();
        lines("pending", [action + " " + i + " / " + todo.length + " …"].concat(summary(counts)));
        act(action, reason, run.run).then(function (result) {
          counts[result] = (counts[result] || 0) + 1;
          setTimeout(next, Math.max(0, 100 - (Date.now() - began)));
        });
      })();
    }).catch(function (doc) {
      lines("refused", doc && doc.code
        ? ["refused: " + doc.status + " " + doc.title, "code: coordinator." + doc.code, doc.detail || ""]
        : ["the console did not answer"]);
    });
  });
})();
