/* embed.c: turns the web console's files into C data for leafd
 * (build/console_assets.c, see src/api/console.h). Build-time only.
 *
 *   embed OUT.c VERSION_SOURCE web/index.html web/other.ext ...
 *
 * The first file is the page, served at /console. Every other file is
 * served at /console/<stem>.<hash>.<ext>, where hash is the FNV-1a hash of
 * its bytes, and each "{{<file name>}}" in the page becomes that URL. The
 * version is the string of `#define LEAFD_VERSION "..."` in VERSION_SOURCE.
 * Fails when the files total more than 100 KB, the console's budget.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FILES  32
#define BUDGET     (100 * 1024)

struct file {
    char          *base;     /* "app.js" */
    char          *name;     /* "app.0123456789ab.js", "" for the page */
    unsigned char *data;
    size_t         len;
};

static void
die(const char *what, const char *arg)
{
    fprintf(stderr, "embed: %s%s%s\n", what, arg ? ": " : "", arg ? arg : "");
    exit(1);
}

static unsigned char *
slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *p = NULL;
    size_t cap = 0, n = 0, r;

    if (f == NULL)
        die("cannot open", path);
    do {
        if (n == cap) {
            cap = cap ? cap * 2 : 65536;
            p = realloc(p, cap + 1);
            if (p == NULL)
                die("out of memory", NULL);
        }
        r = fread(p + n, 1, cap - n, f);
        n += r;
    } while (r > 0);
    if (ferror(f))
        die("cannot read", path);
    fclose(f);
    p[n] = '\0';
    *len = n;
    return p;
}

static uint64_t
fnv1a(const unsigned char *p, size_t n)
{
    uint64_t h = 14695981039346656037ULL;

    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static const char *
content_type(const char *base)
{
    const char *dot = strrchr(base, '.');

    if (dot == NULL)
        die("file without an extension", base);
    if (strcmp(dot, ".html") == 0)
        return "text/html; charset=utf-8";
    if (strcmp(dot, ".js") == 0)
        return "text/javascript; charset=utf-8";
    if (strcmp(dot, ".css") == 0)
        return "text/css; charset=utf-8";
    if (strcmp(dot, ".svg") == 0)
        return "image/svg+xml";
    die("unknown file type", base);
    return NULL;
}

/* Replace each {{base}} in the page by /console/<name>. */
static void
link_assets(struct file *page, const struct file *files, int n)
{
    for (int i = 0; i < n; i++) {
        char pat[256], url[300];
        unsigned char *hit;
        size_t plen, ulen;

        plen = (size_t)snprintf(pat, sizeof pat, "{{%s}}", files[i].base);
        ulen = (size_t)snprintf(url, sizeof url, "/console/%s", files[i].name);
        if (plen >= sizeof pat || ulen >= sizeof url)
            die("file name too long", files[i].base);
        while ((hit = (unsigned char *)strstr((char *)page->data, pat)) != NULL) {
            size_t off = (size_t)(hit - page->data);
            unsigned char *q = malloc(page->len - plen + ulen + 1);
            if (q == NULL)
                die("out of memory", NULL);
            memcpy(q, page->data, off);
            memcpy(q + off, url, ulen);
            memcpy(q + off + ulen, hit + plen, page->len - off - plen + 1);
            free(page->data);
            page->data = q;
            page->len = page->len - plen + ulen;
        }
    }
    if (strstr((char *)page->data, "{{") != NULL)
        die("the page links a file that is not embedded", "{{...}}");
}

static void
version_of(const char *path, char *out, size_t cap)
{
    size_t len;
    char *src = (char *)slurp(path, &len), *p, *e;

    p = strstr(src, "#define LEAFD_VERSION \"");
    if (p == NULL)
        die("no #define LEAFD_VERSION in", path);
    p += strlen("#define LEAFD_VERSION \"");
    e = strchr(p, '"');
    if (e == NULL || (size_t)(e - p) >= cap)
        die("bad LEAFD_VERSION in", path);
    memcpy(out, p, (size_t)(e - p));
    out[e - p] = '\0';
    free(src);
}

int
main(int argc, char **argv)
{
    struct file files[MAX_FILES];
    char version[64];
    size_t total = 0;
    int n = argc - 3;
    FILE *out;

    if (argc < 4 || n > MAX_FILES)
        die("usage: embed OUT.c VERSION_SOURCE page.html [file...]", NULL);
    version_of(argv[2], version, sizeof version);
    for (int i = 0; i < n; i++) {
        const char *path = argv[3 + i], *slash = strrchr(path, '/');
        const char *base = slash ? slash + 1 : path, *dot;
        char name[256];

        files[i].base = strdup(base);
        files[i].data = slurp(path, &files[i].len);
        total += files[i].len;
        (void)content_type(base);
        dot = strrchr(base, '.');
        if (i == 0) {
            name[0] = '\0';
        } else if ((size_t)snprintf(name, sizeof name, "%.*s.%012llx%s",
                                    (int)(dot - base), base,
                                    (unsigned long long)(fnv1a(files[i].data, files[i].len)
                                                         >> 16), dot) >= sizeof name) {
            die("file name too long", base);
        }
        files[i].name = strdup(name);
    }
    if (total > BUDGET) {
        fprintf(stderr, "embed: the console is %zu bytes, over its %d byte budget\n",
                total, BUDGET);
        return 1;
    }
    link_assets(&files[0], files + 1, n - 1);

    out = fopen(argv[1], "w");
    if (out == NULL)
        die("cannot write", argv[1]);
    fprintf(out, "/* Generated by tools/embed.c from web/: do not edit. */\n"
                 "#include \"console.h\"\n\n"
                 "const char console_version[] = \"%s\";\n\n", version);
    for (int i = 0; i < n; i++) {
        fprintf(out, "/* %s */\nstatic const unsigned char f%d[] = {", files[i].base, i);
        for (size_t k = 0; k < files[i].len; k++)
            fprintf(out, "%s%u,", k % 24 ? "" : "\n", files[i].data[k]);
        fprintf(out, "0\n};\n\n");
    }
    fprintf(out, "const struct console_asset console_assets[] = {\n");
    for (int i = 0; i < n; i++)
        fprintf(out, "    { \"%s\", \"%s\", f%d, %zu },\n", files[i].name,
                content_type(files[i].base), i, files[i].len);
    fprintf(out, "};\nconst size_t console_nassets = %d;\n", n);
    if (fclose(out) != 0)
        die("cannot write", argv[1]);
    return 0;
}
