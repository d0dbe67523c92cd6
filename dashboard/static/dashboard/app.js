/* Tickwork dashboard: live updates over a WebSocket, small SVG charts, form helpers.
 * Hand-written, no dependencies. Everything degrades to plain links and forms without it.
 *
 * Live updates: the server pushes execution events ({type: "events", events: [...]}). Each event
 * updates matching state badges and run graph nodes at once ([data-exec="<execution id>"],
 * [data-node-exec="<execution id>"]), then the regions of the
 * page that care ([data-live-region], optionally limited by data-live-job / data-live-execution)
 * are re-read from the server: the same URL is fetched and those regions are swapped in place.
 * data-live-run limits a region to the events of one workflow run's executions (e.runId).
 * The page never navigates; the server renders, so what is shown is what the database says.
 */
(function () {
  "use strict";

  var SVG = "http://www.w3.org/2000/svg";
  var TONES = {
    BLOCKED: "neutral", PENDING: "neutral", QUEUED: "indigo", RUNNING: "blue", SUCCEEDED: "green", FAILED: "amber",
    TIMED_OUT: "amber", FAILED_WORKER_LOST: "amber", CANCELLED: "muted", DEAD: "red",
    DISCARDED: "muted"
  };
  var LABELS = { FAILED_WORKER_LOST: "WORKER LOST" };

  // --- Relative times ------------------------------------------------------------------------
  function relTimes(root) {
    var now = Date.now();
    root.querySelectorAll("time[data-rel]").forEach(function (el) {
      var t = Date.parse(el.getAttribute("datetime"));
      if (isNaN(t)) return;
      var s = Math.round((now - t) / 1000);
      var text = s < 0 ? "in " + human(-s) : human(s) + " ago";
      el.title = el.title || el.textContent;
      el.textContent = text;
    });
  }
  // A span as readmodels/durations.py writes it on the server: its two largest units, the
  // smaller one cut (15 h 25 min, 2 min 5 s, 3 d), so a page reads the same wherever it was drawn.
  var UNITS = [["d", 86400], ["h", 3600], ["min", 60], ["s", 1]];
  function human(s) {
    var left = Math.max(Math.floor(s), 0), parts = [];
    for (var i = 0; i < UNITS.length && parts.length < 2; i++) {
      var count = Math.floor(left / UNITS[i][1]);
      left -= count * UNITS[i][1];
      if (count || parts.length) parts.push(count ? count + " " + UNITS[i][0] : "");
    }
    return parts.filter(Boolean).join(" ") || "0 s";
  }

  // --- Charts ----------------------------------------------------------------------------------
  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (parent) parent.appendChild(node);
    return node;
  }
  // The top of a chart's axis: an even number of steps (its midline is labelled too, and a
  // count's midline of 2.5 or 0.5 would be shown rounded, twice the same number), at least 2.
  function niceMax(v) {
    if (!v || v <= 2) return 2;
    var p = Math.pow(10, Math.floor(Math.log10(v)));
    var n = v / p;
    return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 4 ? 4 : n <= 6 ? 6 : n <= 8 ? 8 : 10) * p;
  }
  function fmtMs(v) {
    if (v == null) return "—";
    if (v < 1000) return Math.round(v) + " ms";
    if (v < 60000) return (v / 1000).toFixed(1) + " s";
    return human(v / 1000);
  }
  function frame(container, max, fmt) {
    container.textContent = "";
    var w = Math.max(container.clientWidth, 280), h = Math.max(container.clientHeight, 140);
    var pad = { l: 46, r: 8, t: 8, b: 22 };
    var svg = el("svg", { viewBox: "0 0 " + w + " " + h, preserveAspectRatio: "none" }, container);
    var plotW = w - pad.l - pad.r, plotH = h - pad.t - pad.b;
    [0, 0.5, 1].forEach(function (f) {
      var y = pad.t + plotH - f * plotH;
      el("line", { x1: pad.l, x2: w - pad.r, y1: y, y2: y, "class": f === 0 ? "axis" : "grid" }, svg);
      var label = el("text", { x: pad.l - 6, y: y + 4, "text-anchor": "end" }, svg);
      label.textContent = fmt(max * f);
    });
    return { svg: svg, w: w, h: h, pad: pad, plotW: plotW, plotH: plotH };
  }
  // The time axis: of the server's choices of labels (dashboard/overview/time_axis.py: round times, evenly
  // spaced, finest first), the finest whose neighbours stand far enough apart for their text, as
  // drawn in this chart. A label marks the start of its bucket; one that would run past the
  // chart's edge is left out.
  function xLabels(f, d) {
    var n = d.minutes.length, step = f.plotW / n, choices = d.axis || [], widths = {};
    var probe = el("text", { x: 0, y: f.h - 6, visibility: "hidden" }, f.svg);
    function width(text) {
      if (!(text in widths)) { probe.textContent = text; widths[text] = probe.getComputedTextLength(); }
      return widths[text];
    }
    var chosen = choices.find(function (marks) {
      var widest = Math.max.apply(null, marks.map(function (m) { return width(m[1]); }));
      return (marks[1][0] - marks[0][0]) * step >= widest + 12;
    }) || choices[choices.length - 1] || [];
    chosen.forEach(function (mark) {
      var x = f.pad.l + mark[0] * step, half = width(mark[1]) / 2;
      if (x + half > f.w || x - half < 0) return;
      el("line", { x1: x, x2: x, y1: f.pad.t + f.plotH, y2: f.pad.t + f.plotH + 4, "class": "axis" }, f.svg);
      var t = el("text", { x: x, y: f.h - 6, "text-anchor": "middle", "data-axis-label": "" }, f.svg);
      t.textContent = mark[1];
    });
    probe.remove();
  }
  function throughput(container, d) {
    var totals = d.minutes.map(function (_, i) { return d.succeeded[i] + d.failed[i] + d.cancelled[i]; });
    var max = niceMax(Math.max.apply(null, totals.concat([0])));
    var f = frame(container, max, function (v) { return Math.round(v).toString(); });
    var n = d.minutes.length, step = f.plotW / n, bw = Math.max(step - 2, 1);
    var series = [["succeeded", "var(--green)"], ["failed", "var(--red)"], ["cancelled", "var(--muted-c)"]];
    for (var i = 0; i < n; i++) {
      var y = f.pad.t + f.plotH, x = f.pad.l + i * step + (step - bw) / 2;
      var g = el("g", {}, f.svg);
      el("title", {}, g).textContent = d.minutes[i] + " UTC — " + d.succeeded[i] + " succeeded, " +
        d.failed[i] + " dead, " + d.cancelled[i] + " cancelled";
      el("rect", { x: x - (step - bw) / 2, y: f.pad.t, width: step, height: f.plotH, fill: "transparent" }, g);
      series.forEach(function (s) {
        var v = d[s[0]][i];
        if (!v) return;
        var bh = (v / max) * f.plotH;
        y -= bh;
        el("rect", { x: x, y: y, width: bw, height: Math.max(bh, 1), fill: s[1], rx: 1 }, g);
      });
    }
    xLabels(f, d);
    if (!totals.some(Boolean)) note(f, "Nothing finished in the last " + (d.rangeLabel || "1 h"));
  }
  function lag(container, d) {
    var values = d.p99.concat(d.p50).filter(function (v) { return v != null; });
    var max = niceMax(Math.max.apply(null, values.concat([0])));
    var f = frame(container, max, fmtMs);
    var n = d.minutes.length, step = f.plotW / n;
    [["p50", "var(--blue)"], ["p99", "var(--amber)"]].forEach(function (s) {
      var path = "", pen = false;
      d[s[0]].forEach(function (v, i) {
        if (v == null) { pen = false; return; }
        var x = f.pad.l + i * step + step / 2, y = f.pad.t + f.plotH - (v / max) * f.plotH;
        path += (pen ? "L" : "M") + x.toFixed(1) + " " + y.toFixed(1) + " ";
        pen = true;
        var dot = el("circle", { cx: x, cy: y, r: 2.5, fill: s[1] }, f.svg);
        el("title", {}, dot).textContent = d.minutes[i] + " UTC — " + s[0] + " " + fmtMs(v);
      });
      if (path) el("path", { d: path, fill: "none", stroke: s[1], "stroke-width": 2, "stroke-linejoin": "round" }, f.svg);
    });
    xLabels(f, d);
    if (!values.length) note(f, "Nothing started in the last " + (d.rangeLabel || "1 h"));
  }
  function note(f, text) {
    var t = el("text", { x: f.pad.l + f.plotW / 2, y: f.pad.t + f.plotH / 2, "text-anchor": "middle", "class": "empty-note" }, f.svg);
    t.textContent = text;
  }
  // One line per pool of d[series][pool] (the due backlog, or what is admitted), with a legend.
  var POOL_COLOURS = ["var(--indigo)", "var(--amber)", "var(--blue)", "var(--green)", "var(--red)", "var(--muted-c)"];
  function pools(container, d) {
    var series = container.getAttribute("data-series"), byPool = d[series] || {};
    var names = d.pools || [], values = [];
    names.forEach(function (p) { values = values.concat(byPool[p]); });
    var max = niceMax(Math.max.apply(null, values.concat([0])));
    var f = frame(container, max, function (v) { return Math.round(v).toString(); });
    var n = d.minutes.length, step = f.plotW / n;
    names.forEach(function (p, k) {
      var colour = POOL_COLOURS[k % POOL_COLOURS.length], path = "";
      byPool[p].forEach(function (v, i) {
        var x = f.pad.l + i * step + step / 2, y = f.pad.t + f.plotH - (v / max) * f.plotH;
        path += (i ? "L" : "M") + x.toFixed(1) + " " + y.toFixed(1) + " ";
        var hit = el("circle", { cx: x, cy: y, r: 2, fill: colour }, f.svg);
        el("title", {}, hit).textContent = d.minutes[i] + " UTC — " + p + ": " + v;
      });
      el("path", { d: path, fill: "none", stroke: colour, "stroke-width": 2, "stroke-linejoin": "round" }, f.svg);
    });
    xLabels(f, d);
    if (!values.some(Boolean)) note(f, "No " + (series === "due" ? "backlog" : "admitted work") + " recorded in the last " + d.rangeLabel);
    var legend = container.parentNode.querySelector("[data-pool-legend]");
    if (legend) {
      legend.textContent = "";
      names.forEach(function (p, k) {
        var sw = document.createElement("i");
        sw.className = "sw";
        sw.style.background = POOL_COLOURS[k % POOL_COLOURS.length];
        legend.appendChild(sw);
        legend.appendChild(document.createTextNode(p));
      });
    }
  }
  var CHARTS = { lag: lag, throughput: throughput, pools: pools };
  function charts(root) {
    root.querySelectorAll("[data-chart]").forEach(function (c) {
      var source = document.getElementById(c.getAttribute("data-source"));
      if (!source) return;
      var data = JSON.parse(source.textContent);
      (CHARTS[c.getAttribute("data-chart")] || throughput)(c, data);
    });
  }

  // --- Forms ---------------------------------------------------------------------------------------
  document.addEventListener("submit", function (e) {
    var form = e.target;
    // A button may ask its own question (a bulk bar's "Cancel selected"), before its form's.
    var question = (e.submitter && e.submitter.getAttribute("data-confirm")) || form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) e.preventDefault();
  });
  document.addEventListener("change", function (e) {
    var all = e.target.closest("[data-select-all]");
    if (all) {
      document.querySelectorAll('input[type=checkbox][name="' + all.getAttribute("data-select-all") + '"]')
        .forEach(function (box) { box.checked = all.checked; });
    }
  });

  function jobForm(form) {
    var typeInput = form.querySelector("[data-type-select]");
    function showFor() {
      var type = typeInput ? typeInput.value : "";
      form.querySelectorAll("[data-for-type]").forEach(function (f) {
        // A field may serve several types: data-for-type="CRON INTERVAL".
        f.hidden = type && f.getAttribute("data-for-type").split(" ").indexOf(type) < 0;
      });
    }
    if (typeInput) { typeInput.addEventListener("change", showFor); showFor(); }
    // The chosen handler's pool, description and payload fields (GET /v1/handlers, rendered in).
    var handler = form.querySelector("[data-handler-select]");
    var about = form.querySelector("[data-handler-about]");
    var defaultPool = form.querySelector("[data-handler-pool]");
    var defaultLimit = form.querySelector("[data-handler-rate-limit]");
    function describeHandler() {
      var option = handler.options[handler.selectedIndex];
      if (!option) return;
      var payload = option.getAttribute("data-payload");
      if (about) about.textContent = option.getAttribute("data-description") + (payload ? " Payload: " + payload + "." : "");
      var pool = option.getAttribute("data-pool");
      if (defaultPool) defaultPool.textContent = "Handler's default" + (pool ? " (" + pool + ")" : "");
      var limit = option.getAttribute("data-rate-limit");
      if (defaultLimit) defaultLimit.textContent = "None — the handler's own" + (limit ? " (" + limit + ")" : "");
    }
    if (handler) handler.addEventListener("change", describeHandler);
    var schedule = form.querySelector("[data-schedule-input]");
    var zone = form.querySelector("[data-timezone-input]");
    var every = form.querySelector("[data-every-input]");
    var start = form.querySelector("[data-start-input]");
    var preview = form.querySelector("[data-schedule-preview]");
    if (!schedule || !preview) return;
    var timer = null;
    function intervalUrl() {
      var seconds = every ? every.value.trim() : "";
      if (!seconds) return null;
      var url = "/v1/schedule/preview?count=5&everySec=" + encodeURIComponent(seconds);
      if (start && start.value.trim()) url += "&startAt=" + encodeURIComponent(start.value.trim());
      return url;
    }
    function update() {
      var interval = typeInput && typeInput.value === "INTERVAL";
      var expr = schedule.value.trim();
      var url = interval ? intervalUrl() : null;
      if (!interval && expr) {
        url = "/v1/schedule/preview?count=5&schedule=" + encodeURIComponent(expr) +
          "&timezone=" + encodeURIComponent((zone && zone.value.trim()) || "UTC");
        // An existing job's H values are resolved with its id; a new job has none yet.
        var seed = preview.getAttribute("data-seed");
        if (seed) url += "&seed=" + encodeURIComponent(seed);
      }
      if (!url) {
        preview.innerHTML = '<span class="muted">Type ' + (interval ? "an interval" : "a schedule") +
          " to preview its next fires.</span>";
        return;
      }
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) { return r.json().then(function (body) { return { ok: r.ok, body: body }; }); })
        .then(function (res) {
          preview.textContent = "";
          if (!res.ok) {
            var err = document.createElement("span");
            err.className = "field-error";
            err.textContent = res.body.seed && !res.body.schedule
              ? "H values are chosen from the job's id: its times show once it is created."
              : JSON.stringify(res.body.schedule || res.body.everySec || res.body.startAt || res.body.timezone ||
                               res.body.detail || res.body);
            preview.appendChild(err);
            return;
          }
          var table = document.createElement("table");
          res.body.fireTimes.forEach(function (f) {
            var tr = table.insertRow();
            tr.insertCell().textContent = f.utc;
            tr.insertCell().textContent = f.local;
          });
          preview.appendChild(table);
        })
        .catch(function () { /* the preview is a help, never a blocker */ });
    }
    function later() { clearTimeout(timer); timer = setTimeout(update, 300); }
    [schedule, zone, every, start, typeInput].forEach(function (input) {
      if (input) input.addEventListener(input === typeInput ? "change" : "input", later);
    });
    update();
  }

  // --- Live ----------------------------------------------------------------------------------------
  var body = document.body;
  var after = Number(body.getAttribute("data-live-after") || 0);
  var jobsAfter = Number(body.getAttribute("data-live-jobs-after") || 0);
  // The derived events (a happy run's, told by its columns) have no id: their cursor is a time.
  var liveAt = Number(body.getAttribute("data-live-at") || 0);
  var statusEl = document.querySelector("[data-live-status]");
  var socket = null, retry = 0;
  var dirty = {}, inFlight = false, lastRefresh = 0, refreshTimer = null;
  var MIN_GAP = 700;

  function setStatus(state, text) {
    if (!statusEl) return;
    statusEl.setAttribute("data-live-status", state);
    statusEl.querySelector("span").textContent = text;
  }

  function connect() {
    var path = body.getAttribute("data-live-path");
    if (!path || !window.WebSocket) return;
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + location.host + path + "?after=" + after + "&jobs_after=" + jobsAfter + (liveAt ? "&at=" + liveAt : ""));
    socket.onopen = function () { retry = 0; setStatus("live", "Live"); };
    socket.onmessage = function (m) {
      var msg;
      try { msg = JSON.parse(m.data); } catch (e) { return; }
      if (msg.type === "events") onEvents(msg.events || []);
      if (msg.type === "jobs") onJobs(msg.jobs || []);
    };
    socket.onclose = function (e) {
      socket = null;
      if (e.code === 4401) { setStatus("offline", "Signed out"); return; }
      setStatus("offline", "Reconnecting");
      retry = Math.min(retry + 1, 6);
      setTimeout(connect, 250 * Math.pow(2, retry));
    };
  }

  function regionWants(region, events) {
    var job = region.getAttribute("data-live-job"), exec = region.getAttribute("data-live-execution");
    var run = region.getAttribute("data-live-run");
    if (!job && !exec && !run) return events.length > 0;
    return events.some(function (e) {
      return (job && e.jobId === job) || (exec && e.executionId === exec) || (run && e.runId === run);
    });
  }

  function onEvents(events) {
    if (!events.length) return;
    events.forEach(function (e) {
      after = Math.max(after, e.id);
      if (e.id === null) liveAt = Math.max(liveAt, Date.parse(e.at) / 1000 || 0);
      document.querySelectorAll('[data-exec="' + e.executionId + '"]').forEach(function (badge) {
        if (badge.getAttribute("data-state") === e.to) return;
        badge.setAttribute("data-state", e.to);
        badge.className = "badge tone-" + (TONES[e.to] || "neutral") + " flash";
        badge.textContent = LABELS[e.to] || e.to.replace(/_/g, " ");
        badge.title = e.to;
      });
      // A run graph's node (SVG: its class is set as an attribute) changes colour at once too.
      document.querySelectorAll('[data-node-exec="' + e.executionId + '"]').forEach(function (node) {
        if (node.getAttribute("data-state") === e.to) return;
        node.setAttribute("data-state", e.to);
        node.setAttribute("class", "run-node tone-" + (TONES[e.to] || "neutral"));
        var label = node.querySelector(".run-node-state");
        if (label) label.textContent = (LABELS[e.to] || e.to.replace(/_/g, " ")) + " · attempt " + e.attempt;
      });
    });
    var any = false;
    document.querySelectorAll("[data-live-region]").forEach(function (region) {
      if (regionWants(region, events)) { dirty[region.id] = true; any = true; }
    });
    if (any) scheduleRefresh();
  }

  // A job paused, resumed, edited or cancelled by anyone (the API, the admin, another tab): the
  // regions about that job, and those about every job (the job list, the overview), are re-read.
  function onJobs(jobs) {
    if (!jobs.length) return;
    jobs.forEach(function (j) { jobsAfter = Math.max(jobsAfter, j.id); });
    var any = false;
    document.querySelectorAll("[data-live-region]").forEach(function (region) {
      var job = region.getAttribute("data-live-job");
      var narrowed = job || region.getAttribute("data-live-execution") || region.getAttribute("data-live-run");
      var wants = job ? jobs.some(function (j) { return j.jobId === job; }) : !narrowed;
      if (wants) { dirty[region.id] = true; any = true; }
    });
    if (any) scheduleRefresh();
  }

  function scheduleRefresh() {
    if (inFlight || refreshTimer) return;
    var wait = Math.max(0, lastRefresh + MIN_GAP - Date.now());
    refreshTimer = setTimeout(refresh, wait);
  }

  function refresh() {
    refreshTimer = null;
    var ids = Object.keys(dirty);
    if (!ids.length) return;
    dirty = {};
    inFlight = true;
    lastRefresh = Date.now();
    fetch(location.href, { credentials: "same-origin", headers: { "X-Live-Refresh": "1" } })
      .then(function (r) { return r.ok && !r.redirected ? r.text() : null; })
      .then(function (html) {
        if (!html) return;
        var doc = new DOMParser().parseFromString(html, "text/html");
        ids.forEach(function (id) {
          var current = document.getElementById(id), fresh = doc.getElementById(id);
          if (!current || !fresh) return;
          var checked = {};
          current.querySelectorAll("input[type=checkbox]:checked").forEach(function (b) { checked[b.name + "=" + b.value] = true; });
          current.innerHTML = fresh.innerHTML;
          current.querySelectorAll("input[type=checkbox]").forEach(function (b) { if (checked[b.name + "=" + b.value]) b.checked = true; });
          charts(current);
          relTimes(current);
        });
        var nav = doc.querySelector(".nav"), navNow = document.querySelector(".nav");
        if (nav && navNow) navNow.innerHTML = nav.innerHTML;
      })
      .catch(function () { /* the next event retries */ })
      .then(function () {
        inFlight = false;
        if (Object.keys(dirty).length) scheduleRefresh();
      });
  }

  // --- Polled regions ------------------------------------------------------------------------------
  // A region with data-poll-src (an execution's log lines while it runs: dashboard/executions/logs.py) is read
  // again from that URL every data-poll-ms and replaced whole; the server ends the polling by
  // rendering it without the attribute. Log lines commit no execution events, so the feed above
  // cannot say when there are more. A reader scrolled to the end of the lines stays at the end.
  var polling = {};

  function pollRegions() {
    document.querySelectorAll("[data-poll-src]").forEach(function (region) {
      if (polling[region.id]) return;
      polling[region.id] = true;
      setTimeout(function () { pollRegion(region); }, Number(region.getAttribute("data-poll-ms") || 1000));
    });
  }

  function pollRegion(region) {
    var src = region.getAttribute("data-poll-src");
    fetch(src, { credentials: "same-origin", headers: { "X-Live-Refresh": "1" } })
      .then(function (r) { return r.ok && !r.redirected ? r.text() : null; })
      .then(function (html) {
        var current = document.getElementById(region.id);
        // Swapped meanwhile (a live refresh of the page brought a newer one) or gone: not ours to replace.
        if (!html || current !== region) return;
        var box = region.querySelector(".log-lines");
        var atEnd = !box || box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
        var top = box ? box.scrollTop : 0;
        var holder = document.createElement("div");
        holder.innerHTML = html.trim();
        var fresh = holder.firstElementChild;
        if (!fresh || fresh.id !== region.id) return;
        region.replaceWith(fresh);
        foldBanner(fresh);
        relTimes(fresh);
        var freshBox = fresh.querySelector(".log-lines");
        if (freshBox) freshBox.scrollTop = atEnd ? freshBox.scrollHeight : top;
      })
      .catch(function () { /* the next poll retries */ })
      .then(function () {
        polling[region.id] = false;
        pollRegions();
      });
  }

  // --- The firing alerts' banner ----------------------------------------------------------------------
  // A <details> the server renders open for one alert and folded for several. Folding or opening it
  // is remembered here (this browser), and kept on every page and through the banner's polls for as
  // long as the same alerts fire: a new one is shown as the server renders it.
  var BANNER_KEY = "tickwork.alertBanner";

  function foldBanner(root) {
    var banner = root.querySelector("[data-alert-banner]"), choice = null;
    if (!banner) return;
    try { choice = JSON.parse(window.localStorage.getItem(BANNER_KEY) || "null"); } catch (e) { return; }
    if (choice && choice.alerts === banner.getAttribute("data-alert-banner")) banner.open = choice.open;
  }
  document.addEventListener("click", function (e) {
    var summary = e.target.closest("[data-alert-banner] > summary");
    if (!summary) return;
    var banner = summary.parentNode;
    var choice = { alerts: banner.getAttribute("data-alert-banner"), open: !banner.open };  // the click toggles it next
    try { window.localStorage.setItem(BANNER_KEY, JSON.stringify(choice)); } catch (err) { /* not remembered */ }
  });

  // --- Narrow screens: the menu -----------------------------------------------------------------------
  // Under 760 px the sections fold behind a Menu button (app.css); without this script they stay shown.
  document.documentElement.classList.add("js");
  document.addEventListener("click", function (e) {
    var toggle = e.target.closest("[data-menu-toggle]");
    if (!toggle) return;
    var sidebar = toggle.closest(".sidebar");
    var open = sidebar.classList.toggle("menu-open");
    toggle.setAttribute("aria-expanded", open ? "true" : "false");
  });

  // --- Start -----------------------------------------------------------------------------------------
  function start() {
    foldBanner(document);
    charts(document);
    relTimes(document);
    document.querySelectorAll("[data-job-form]").forEach(jobForm);
    var resizeTimer = null;
    window.addEventListener("resize", function () {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(function () { charts(document); }, 150);
    });
    setInterval(function () { relTimes(document); }, 15000);
    // A live refresh may bring a polled region in (the run started): look for new ones each second.
    setInterval(pollRegions, 1000);
    pollRegions();
    connect();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
