/* curves.c: a training run's curves as one self-contained HTML page
 * (pprt --curves FILE): the step losses with the held-out losses, the
 * held-out accuracy, the learning rate, the rate and the devices' idle
 * share per step, drawn as inline SVG from the records --log-json writes
 * (the same tree, so the page and the log never disagree). No script, no
 * external file: it opens anywhere. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "curves.h"

#define W 640 /* a chart's plot area, px */
#define H 220
#define ML 64 /* margins: left (the y labels), bottom (the x labels) */
#define MB 34
#define MT 26

typedef struct series {
    const char *label, *color;
    const char *xkey, *ykey; /* fields of each record */
    const cJSON *recs;
    bool dots; /* points (epochs) rather than a line (steps) */
} series;

static bool num(const cJSON *o, const char *key, double *v) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble)) return false;
    *v = x->valuedouble;
    return true;
}

/* A chart of up to 3 series on one pair of axes; nothing when no series has a point. */
static void chart(FILE *f, const char *title, const char *xname, const series *sv, int n) {
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    int pts = 0;
    for (int k = 0; k < n; k++) {
        const cJSON *r;
        cJSON_ArrayForEach(r, sv[k].recs) {
            double x, y;
            if (!num(r, sv[k].xkey, &x) || !num(r, sv[k].ykey, &y)) continue;
            x0 = fmin(x0, x), x1 = fmax(x1, x), y0 = fmin(y0, y), y1 = fmax(y1, y);
            pts++;
        }
    }
    if (!pts) return;
    if (y0 > 0 && y0 < 0.5 * y1) y0 = 0; /* from 0 where that costs little of the height */
    if (x1 <= x0) x1 = x0 + 1;
    if (y1 <= y0) y1 = y0 + (y0 ? fabs(y0) * 0.1 : 1);
    fprintf(f, "<figure><figcaption>%s</figcaption>\n<svg width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "role=\"img\" aria-label=\"%s\">\n",
            title, W + ML + 16, H + MB + MT, W + ML + 16, H + MB + MT, title);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999\"/>\n", ML, MT, W, H);
    for (int t = 0; t <= 4; t++) { /* five labels on each axis */
        const double yv = y0 + (y1 - y0) * t / 4, xv = x0 + (x1 - x0) * t / 4;
        const int yp = MT + H - H * t / 4, xp = ML + W * t / 4;
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#eee\"/>"
                   "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" font-size=\"11\">%.4g</text>\n",
                ML, yp, ML + W, yp, ML - 4, yp + 4, yv);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"11\">%.4g</text>\n", xp, MT + H + 14, xv);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"11\">%s</text>\n", ML + W / 2, MT + H + 30,
            xname);
    for (int k = 0; k < n; k++) {
        const cJSON *r;
        int m = 0;
        if (!sv[k].dots) fprintf(f, "<polyline class=\"series\" data-label=\"%s\" fill=\"none\" stroke=\"%s\" "
                                    "stroke-width=\"1.5\" points=\"", sv[k].label, sv[k].color);
        cJSON_ArrayForEach(r, sv[k].recs) {
            double x, y;
            if (!num(r, sv[k].xkey, &x) || !num(r, sv[k].ykey, &y)) continue;
            const double px = ML + W * (x - x0) / (x1 - x0), py = MT + H - H * (y - y0) / (y1 - y0);
            if (sv[k].dots)
                fprintf(f, "<circle class=\"point\" data-label=\"%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\">"
                           "<title>%s %.6g: %.6g</title></circle>\n", sv[k].label, px, py, sv[k].color, xname, x, y);
            else fprintf(f, "%s%.1f,%.1f", m ? " " : "", px, py);
            m++;
        }
        if (!sv[k].dots) fprintf(f, "\"/>\n");
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"%s\">%s (%d)</text>\n", ML + 8 + 150 * k, MT - 8,
                sv[k].color, sv[k].label, m);
    }
    fprintf(f, "</svg></figure>\n");
}

pp_status pprt_curves_write(const char *path, const cJSON *log, pp_err *err) {
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(log, "steps");
    const cJSON *epochs = cJSON_GetObjectItemCaseSensitive(log, "epochs");
    const cJSON *devs = cJSON_GetObjectItemCaseSensitive(log, "stash");
    pp_outfile out;
    PP_TRY(pp_outfile_open(&out, path, err));
    FILE *f = out.f;
    double rows = 0, acc = 0, ndev = 0, wall = 0, bub = 0, bubf = 0;
    num(log, "rows", &rows), num(log, "accumulate", &acc), num(log, "devices", &ndev);
    num(log, "wall_s", &wall), num(log, "bubble", &bub), num(log, "bubble_formula", &bubf);
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>pprt training curves</title>\n"
               "<style>body{font-family:sans-serif;margin:1.5em}figure{margin:1em 0}figcaption{font-weight:bold}"
               "td,th{padding:2px 10px;text-align:right}</style></head><body>\n");
    fprintf(f, "<h1>Training curves</h1>\n<p>%d steps of %g micro-batches of %g rows on %g device%s; %.1f s; the "
               "devices idle %.1f%% of the time (the schedule's formula (P-1)/(M+P-1): %.1f%%).</p>\n",
            cJSON_GetArraySize(steps), acc, rows, ndev, ndev == 1 ? "" : "s", wall, 100 * bub, 100 * bubf);
    const series loss[] = {{"step loss", "#1f77b4", "step", "loss", steps, false},
                           {"held-out loss", "#d62728", "step", "eval_loss", epochs, true}};
    chart(f, "Loss", "step", loss, 2);
    const series accs[] = {{"held-out accuracy", "#2ca02c", "epoch", "eval_accuracy", epochs, true}};
    chart(f, "Held-out top-1 accuracy", "epoch (from 0)", accs, 1);
    const series lr[] = {{"learning rate", "#9467bd", "step", "lr", steps, false}};
    chart(f, "Learning rate", "step", lr, 1);
    const series gn[] = {{"gradient norm", "#8c564b", "step", "grad_norm", steps, false}};
    chart(f, "Global gradient norm (before clipping)", "step", gn, 1);
    const series rate[] = {{"samples/s", "#ff7f0e", "step", "samples_per_s", steps, false}};
    chart(f, "Throughput", "step", rate, 1);
    const series idle[] = {{"idle share", "#7f7f7f", "step", "bubble", steps, false}};
    chart(f, "The devices' idle share per step", "step", idle, 1);
    if (cJSON_GetArraySize(devs) > 0) {
        fprintf(f, "<h2>What each device kept between its stages</h2>\n<table><tr><th>device</th>"
                   "<th>most micro-batches at once</th><th>MB each</th><th>MB at most</th></tr>\n");
        const cJSON *d;
        cJSON_ArrayForEach(d, devs) {
            double dv = 0, pk = 0, by = 0;
            num(d, "device", &dv), num(d, "stash_peak", &pk), num(d, "stash_bytes", &by);
            fprintf(f, "<tr><td>%g</td><td>%g</td><td>%.3f</td><td>%.3f</td></tr>\n", dv, pk, by / 1e6, pk * by / 1e6);
        }
        fprintf(f, "</table>\n");
    }
    fprintf(f, "</body></html>\n");
    return pp_outfile_commit(&out, !ferror(f), err);
}
