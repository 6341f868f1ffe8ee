/* Live weights for the vnr scenario report: re-rank the models when a group-weight slider moves.
 *
 * Reads the JSON element with id "live-data" (written by ranking/scenarios/live.py) and
 * recomputes, under the "weighted" setting, the rules listed there, with the same
 * arithmetic and tie tolerances as the Python rules (ranking/rules.py, ranking/pairwise.py):
 * positional points and median-imputed means are fixed per criterion, pairwise "better"
 * relations are fixed per criterion; only the criterion weights change with the sliders.
 *
 * A URL hash "#weights=0.4,0.3,0.3" sets the sliders on load; several vectors separated
 * by ";" are applied one after another through the sliders, and every resulting ranking
 * is written as JSON into the hidden element with id "live-output" (what the browser test reads).
 */
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("live-data").textContent);
  var RTOL = 1e-12;
  var n = D.models.length, C = D.criteria.length, G = D.groups.length;
  var LABELS = {
    borda: "Borda", dowdall: "Dowdall", plurality: "Plurality", arithmetic_mean: "mean",
    copeland: "Copeland", minimax: "Minimax"
  };

  function criterionWeights(gw) {
    var w = new Array(C);
    for (var j = 0; j < C; j++) {
      var g = D.group_of[j];
      w[j] = (g < 0 || D.totals[g] === 0) ? D.own[j] : D.own[j] * gw[g] / D.totals[g];
    }
    return w;
  }

  /* 1 + the number of scores better by more than atol; null stays null (ranking/result.py). */
  function positions(scores, atol) {
    return scores.map(function (s) {
      if (s === null || isNaN(s)) return null;
      var better = 0;
      for (var k = 0; k < scores.length; k++) {
        if (scores[k] !== null && !isNaN(scores[k]) && scores[k] > s + atol) better++;
      }
      return better + 1;
    });
  }

  function rankAll(gw) {
    var w = criterionWeights(gw);
    var used = w.map(function (x) { return x > 0; });
    if (!used.some(Boolean)) return null;
    var kept = [], nsub = 0, total = 0, i, j, a, b;
    for (j = 0; j < C; j++) if (used[j]) total += w[j];
    for (i = 0; i < n; i++) {
      kept[i] = false;
      for (j = 0; j < C; j++) if (used[j] && D.present[i][j]) { kept[i] = true; break; }
      if (kept[i]) nsub++;
    }
    var out = {};
    ["borda", "dowdall", "plurality"].forEach(function (rule) {
      var pts = D.points[rule];
      var scores = [];
      for (i = 0; i < n; i++) {
        if (!kept[i]) { scores.push(null); continue; }
        var s = 0;
        for (j = 0; j < C; j++) if (used[j] && pts[i][j] !== null) s += pts[i][j] * w[j];
        scores.push(s);
      }
      var maxPoints = rule === "borda" ? nsub - 1 : 1;
      var scale = total * Math.max(maxPoints, 1);
      out[rule] = {scores: scores, ranks: positions(scores, RTOL * Math.max(scale, 0))};
    });
    (function () {
      var scores = [];
      for (i = 0; i < n; i++) {
        if (!kept[i]) { scores.push(null); continue; }
        var s = 0, bad = false;
        for (j = 0; j < C; j++) {
          if (!used[j]) continue;
          if (D.means[i][j] === null) { bad = true; break; }
          s += D.means[i][j] * w[j];
        }
        scores.push(bad ? NaN : s / total);
      }
      var scale = 0;
      scores.forEach(function (s) { if (s !== null && isFinite(s)) scale = Math.max(scale, Math.abs(s)); });
      out.arithmetic_mean = {scores: scores, ranks: positions(scores, RTOL * scale)};
    })();
    (function () {
      var wins = [];
      for (a = 0; a < n; a++) { wins.push(new Array(n).fill(0)); }
      for (j = 0; j < C; j++) {
        if (!used[j]) continue;
        var bits = D.better[j];
        for (a = 0; a < n; a++) {
          if (!kept[a]) continue;
          for (b = 0; b < n; b++) if (bits.charCodeAt(a * n + b) === 49) wins[a][b] += w[j];
        }
      }
      var tol = RTOL * total;
      var beats = function (x, y) { return wins[x][y] - wins[y][x] > tol; };
      var cope = [], mini = [];
      for (a = 0; a < n; a++) {
        if (!kept[a]) { cope.push(null); mini.push(null); continue; }
        var c = 0, worst = 0;
        for (b = 0; b < n; b++) {
          if (!kept[b] || b === a) continue;
          if (beats(a, b)) c++;
          if (beats(b, a)) { c--; worst = Math.max(worst, wins[b][a]); }
        }
        cope.push(c);
        mini.push(nsub > 1 ? -worst + 0 : 0);
      }
      out.copeland = {scores: cope, ranks: positions(cope, 0)};
      out.minimax = {scores: mini, ranks: positions(mini, tol)};
    })();
    return out;
  }

  /* number-format: begin
   * The report's one number formatter: an exact port of ranking.textable.number (digits = 4), so a score
   * reads the same in the live table as in the report's other tables. Integers in full (below 1e15); else
   * 4 significant digits in fixed notation for 1e-4 <= |x| < 1e6, trailing zeros dropped; else Python's
   * "{:.3g}". Rounding is Python's: half to even on the exact binary value (toFixed rounds a tie up). */
  function exactDigits(a) {
    // [integer digits, fraction digits] of a >= 0, exact: a double >= 1e-4 has at most 67 binary fraction
    // digits, so 80 decimal ones hold it exactly; integers (any size) through BigInt
    if (Number.isInteger(a)) return [BigInt(a).toString(), ""];
    var t = a.toFixed(80).split(".");
    return [t[0], t[1]];
  }
  function roundHalfEven(digits, keep) {
    // the first `keep` digits of a digit string, rounded half to even on the rest (may grow by one digit)
    var head = digits.slice(0, keep), rest = digits.slice(keep);
    while (head.length < keep) head += "0";
    var up = rest.length > 0 && (rest[0] > "5" || (rest[0] === "5" &&
      (/[1-9]/.test(rest.slice(1)) || (Number(head[head.length - 1] || "0") % 2 === 1))));
    return up ? (BigInt(head) + 1n).toString().padStart(keep, "0") : head;
  }
  function stripZeros(t) {
    return t.indexOf(".") >= 0 ? t.replace(/0+$/, "").replace(/\.$/, "") : t;
  }
  function fixed(a, decimals) {
    var d = exactDigits(a), keep = d[0].length + decimals;
    var head = roundHalfEven(d[0] + d[1], keep);
    var intPart = head.slice(0, head.length - decimals).replace(/^0+(?=\d)/, "") || "0";
    return decimals > 0 ? intPart + "." + head.slice(head.length - decimals) : intPart;
  }
  function general3(a) {
    // Python's "{:.3g}" of a > 0, outside [1e-4, 1e6) or an integer of 1e15 and more
    var m, e;
    if (a < 1e-4) {  // no exact tie can occur at 3 significant digits below 1e-4: toExponential is exact
      var parts = a.toExponential(2).split("e");
      m = parts[0].replace(".", ""); e = Number(parts[1]);
    } else {
      var d = exactDigits(a);
      e = d[0].length - 1;
      m = roundHalfEven(d[0] + d[1], 3);
      if (m.length > 3) { m = m.slice(0, 3); e += 1; }
    }
    if (e >= -4 && e < 3) {
      var t = e >= 2 ? m : e >= 0 ? m.slice(0, e + 1) + "." + m.slice(e + 1) : "0." + "0".repeat(-e - 1) + m;
      return stripZeros(t);
    }
    var mant = stripZeros(m[0] + "." + m.slice(1));
    var exp = String(Math.abs(e));
    return mant + "e" + (e < 0 ? "-" : "+") + (exp.length < 2 ? "0" + exp : exp);
  }
  function fmt(x) {
    if (x === null || x === undefined || isNaN(x)) return "–";
    if (!isFinite(x)) return x > 0 ? "inf" : "-inf";
    if (Number.isInteger(x) && Math.abs(x) < 1e15) return String(x === 0 ? 0 : x);
    var a = Math.abs(x), sign = x < 0 ? "-" : "";
    if (a >= 1e-4 && a < 1e6) {
      var decimals = Math.max(3 - Math.floor(Math.log10(a)), 0);
      return sign + stripZeros(fixed(a, decimals));
    }
    return sign + general3(a);
  }
  /* number-format: end */

  /* ------------------------------------------------------------------ the page */
  var root = document.getElementById("live");
  var controls = document.createElement("div");
  controls.className = "live-controls";
  var sliders = [], shares = [];
  D.groups.forEach(function (g, k) {
    var label = document.createElement("label");
    var name = document.createElement("span");
    name.className = "live-group";
    name.textContent = g;
    var input = document.createElement("input");
    input.type = "range"; input.min = "0"; input.max = "1"; input.step = "any";
    input.value = String(D.initial[k]);
    input.id = "live-w-" + k;
    input.setAttribute("aria-label", "weight of group " + g);
    var share = document.createElement("span");
    share.className = "live-share";
    label.appendChild(name); label.appendChild(input); label.appendChild(share);
    controls.appendChild(label);
    sliders.push(input); shares.push(share);
    input.addEventListener("input", update);
  });
  var sortBy = document.createElement("select");
  sortBy.id = "live-sort";
  D.rules.forEach(function (r) {
    var o = document.createElement("option");
    o.value = r; o.textContent = "sort by " + (LABELS[r] || r);
    sortBy.appendChild(o);
  });
  sortBy.addEventListener("change", update);
  var reset = document.createElement("button");
  reset.type = "button"; reset.textContent = "reset";
  reset.addEventListener("click", function () {
    sliders.forEach(function (s, k) { s.value = String(D.initial[k]); });
    update();
  });
  controls.appendChild(sortBy);
  controls.appendChild(reset);
  root.appendChild(controls);
  var message = document.createElement("p");
  message.className = "muted";
  root.appendChild(message);
  var table = document.createElement("table");
  table.id = "live-table";
  var head = document.createElement("tr");
  ["#", "model"].concat(D.rules.map(function (r) { return (LABELS[r] || r) + ": rank (score)"; })).forEach(function (t) {
    var th = document.createElement("th"); th.textContent = t; head.appendChild(th);
  });
  var thead = document.createElement("thead"); thead.appendChild(head); table.appendChild(thead);
  var tbody = document.createElement("tbody"); table.appendChild(tbody);
  root.appendChild(table);

  function currentWeights() { return sliders.map(function (s) { return parseFloat(s.value); }); }

  function update() {
    var gw = currentWeights();
    var sum = gw.reduce(function (x, y) { return x + y; }, 0);
    shares.forEach(function (s, k) {
      s.textContent = sum > 0 ? Math.round(100 * gw[k] / sum) + "%" : "–";
    });
    var stale = document.getElementById("intervals-stale");
    if (stale) {  // the rank intervals and tiers above are drawn for the scenario's own weights only
      var same = gw.every(function (x, k) { return x === D.initial[k]; });
      stale.textContent = same ? "" : "Stale at the live weights: the intervals and tiers are for the scenario's " +
        "weights; re-run vnr report with these weights to recompute them.";
    }
    var res = sum > 0 ? rankAll(gw) : null;
    tbody.textContent = "";
    if (res === null) {
      message.textContent = "All group weights are zero: give at least one group a positive weight.";
      return null;
    }
    message.textContent = "Group weights " + D.groups.map(function (g, k) { return g + " " + fmt(gw[k]); }).join(", ") +
      " (setting weighted, ties " + D.ties + "); rows sorted by " + (LABELS[sortBy.value] || sortBy.value) + " rank.";
    var key = res[sortBy.value].ranks;
    var order = D.models.map(function (_, i) { return i; });
    order.sort(function (x, y) {
      var rx = key[x] === null ? Infinity : key[x], ry = key[y] === null ? Infinity : key[y];
      return rx - ry || x - y;
    });
    order.forEach(function (i, pos) {
      var tr = document.createElement("tr");
      tr.setAttribute("data-model", D.models[i]);
      var td = document.createElement("td"); td.className = "pos"; td.textContent = String(pos + 1); tr.appendChild(td);
      td = document.createElement("td"); td.textContent = D.models[i]; tr.appendChild(td);
      D.rules.forEach(function (r) {
        var rank = res[r].ranks[i];
        var cell = document.createElement("td");
        cell.setAttribute("data-rule", r);
        cell.setAttribute("data-rank", rank === null ? "" : String(rank));
        cell.className = rank === 1 ? "live-first" : "";
        cell.textContent = rank === null ? "–" : String(rank);
        var score = document.createElement("span");
        score.className = "score";
        score.textContent = " (" + fmt(res[r].scores[i]) + ")";
        cell.appendChild(score);
        tr.appendChild(cell);
      });
      tbody.appendChild(tr);
    });
    return res;
  }

  /* The ranks as shown in the table: {rule: {model: rank or null}}. */
  function shownRanks() {
    var out = {};
    D.rules.forEach(function (r) { out[r] = {}; });
    Array.prototype.forEach.call(tbody.querySelectorAll("tr"), function (tr) {
      Array.prototype.forEach.call(tr.querySelectorAll("td[data-rule]"), function (td) {
        var v = td.getAttribute("data-rank");
        out[td.getAttribute("data-rule")][tr.getAttribute("data-model")] = v === "" ? null : Number(v);
      });
    });
    return out;
  }

  var hash = decodeURIComponent(window.location.hash || "");
  var m = /^#weights=(.*)$/.exec(hash);
  if (m) {
    var runs = [];
    m[1].split(";").filter(Boolean).forEach(function (vec) {
      var values = vec.split(",");
      sliders.forEach(function (s, k) {
        if (k < values.length) {
          s.value = values[k];
          s.dispatchEvent(new Event("input"));
        }
      });
      runs.push({weights: currentWeights(), ranks: shownRanks()});
    });
    var pre = document.createElement("pre");
    pre.id = "live-output";
    pre.hidden = true;
    pre.textContent = JSON.stringify(runs);
    root.appendChild(pre);
  } else {
    update();
  }
})();
