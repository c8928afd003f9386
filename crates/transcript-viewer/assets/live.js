// transcript serve's one script (allowed by its hash in the Content-Security-Policy).
// Live updates over Server-Sent Events; every recorded value is written with textContent,
// never parsed as HTML. Without it, every page still works (reload to see more).
(function () {
  "use strict";
  var body = document.body;
  var mode = body.getAttribute("data-live");
  var note = document.getElementById("tv-live");
  if (!mode || !window.EventSource) return;
  if (mode === "list") list();
  if (mode === "run") run();

  function say(text, ended) {
    note.textContent = text;
    note.className = ended ? "tv-live ended" : "tv-live";
  }

  function list() {
    var table = document.getElementById("runs");
    if (!table) return;
    var tbody = table.tBodies[0];
    var insert = body.getAttribute("data-insert") === "1";
    var unseen = 0;
    var source = new EventSource("/api/runs/live?version=" +
      encodeURIComponent(body.getAttribute("data-version") || "0"));
    source.addEventListener("run", function (e) {
      var r;
      try { r = JSON.parse(e.data); } catch (_) { return; }
      var row = document.getElementById("run-" + r.run_id);
      if (!row) {
        if (!insert) {
          unseen += 1;
          say(unseen + " new or changed run(s) outside this view: reload to see them.");
          return;
        }
        row = newRow(r.run_id);
        tbody.insertBefore(row, tbody.firstChild);
      }
      fill(row, r);
    });
    source.addEventListener("stale", function () {
      say("Some updates were missed: reload to see the latest.");
    });
  }

  function cell(row, col) {
    return row.querySelector('td[data-col="' + col + '"]');
  }

  function fill(row, r) {
    var cols = ["workflow", "status", "started", "duration", "events", "cost", "tokens", "models"];
    for (var i = 0; i < cols.length; i++) {
      var td = cell(row, cols[i]);
      if (td && typeof r.cells[cols[i]] === "string") td.textContent = r.cells[cols[i]];
    }
    var status = cell(row, "status");
    if (status) status.className = "st-" + String(r.status).replace(/[^a-z]/g, "");
    row.setAttribute("data-status", String(r.status));
  }

  function newRow(id) {
    var row = document.createElement("tr");
    row.id = "run-" + id;
    ["a", "b"].forEach(function (side) {
      var td = document.createElement("td");
      var input = document.createElement("input");
      input.type = "radio";
      input.name = side;
      input.value = id;
      input.setAttribute("aria-label", side.toUpperCase());
      td.appendChild(input);
      row.appendChild(td);
    });
    var cols = ["id", "workflow", "status", "started", "duration", "events", "cost", "tokens", "models", "replay"];
    cols.forEach(function (col) {
      var td = document.createElement("td");
      td.setAttribute("data-col", col);
      if (["duration", "events", "cost", "tokens"].indexOf(col) >= 0) td.className = "num";
      if (col === "id") {
        var a = document.createElement("a");
        a.href = "/runs/" + encodeURIComponent(id);
        var code = document.createElement("code");
        code.textContent = id.slice(0, 8);
        a.appendChild(code);
        td.appendChild(a);
      }
      row.appendChild(td);
    });
    return row;
  }

  function run() {
    var id = body.getAttribute("data-run");
    var since = body.getAttribute("data-since") || "0";
    var count = 0;
    var pending = false;
    var source = new EventSource("/api/runs/" + encodeURIComponent(id) +
      "/events?since=" + encodeURIComponent(since));
    say("This run is recording: the page follows it.");
    source.onmessage = function () {
      count += 1;
      say("This run is recording: " + count + " new event(s) so far.");
      refresh();
    };
    source.addEventListener("end", function (e) {
      source.close();
      var status = "ended";
      try { status = String(JSON.parse(e.data).status); } catch (_) { /* keep "ended" */ }
      refresh(function () {
        say("The run ended: " + status + ".", true);
        body.setAttribute("data-ended", status);
      });
    });
    function refresh(then) {
      if (pending && !then) return;
      pending = true;
      fetch(location.pathname, { credentials: "same-origin" })
        .then(function (r) { return r.text(); })
        .then(function (html) {
          pending = false;
          var doc = new DOMParser().parseFromString(html, "text/html");
          ["nav", "main"].forEach(function (tag) {
            var now = document.querySelector(tag);
            var next = doc.querySelector(tag);
            if (now && next) now.replaceWith(document.adoptNode(next));
          });
          if (then) then();
        })
        .catch(function () { pending = false; if (then) then(); });
    }
  }
})();
