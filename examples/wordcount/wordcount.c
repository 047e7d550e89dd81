/* wordcount: a dynamically linked gadget (it needs SystemLibraries=yes).
 * count({"text": "..."}) -> {"lines": L, "words": W, "chars": C} */
#include <gadget.h>
#include <locale.h>
#include <stdlib.h>
#include <wchar.h>
#include <wctype.h>

static gadget_value *count(struct gadget_call *call, const gadget_value *args, void *data)
{
        const char *text = gadget_as_string(gadget_map_get(args, "text"));
        int64_t lines = 0, words = 0, chars = 0;
        int in_word = 0;
        mbstate_t st = { 0 };
        const char *s = text;
        wchar_t wc;
        size_t n;
        while ((n = mbrtowc(&wc, s, MB_CUR_MAX, &st)) != 0 && n != (size_t)-1 && n != (size_t)-2) {
                s += n;
                chars++;
                if (wc == L'\n')
                        lines++;
                if (iswspace((wint_t)wc))
                        in_word = 0;
                else if (!in_word && ++words)
                        in_word = 1;
        }
        gadget_value *m = gadget_map();
        gadget_map_set(m, "lines", gadget_int(lines));
        gadget_map_set(m, "words", gadget_int(words));
        gadget_map_set(m, "chars", gadget_int(chars));
        return m;
}

int main(void)
{
        setlocale(LC_ALL, "C.UTF-8");
        struct gadget *g = gadget_new("wordcount");
        gadget_method_typed(g, "count(text: string) -> {lines: int, words: int, chars: int}", count, NULL);
        int e = gadget_serve(g);
        gadget_free(g);
        return e < 0 ? 1 : 0;
}
