/* dl: dlopen of a soname and its symbol table. */
#include "dl.h"

#include <dlfcn.h>
#include <stdio.h>

void *dl_load(const char *soname, const struct dl_sym *syms, size_t n, char *err, size_t errlen)
{
        /* Why this is safe: a soname, found the way the dynamic linker
         * finds gadgetd's other libraries (the system's trusted paths). */
        void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
                snprintf(err, errlen, "cannot load %s: %s", soname, dlerror());
                return NULL;
        }
        for (size_t i = 0; i < n; i++)
                if (!(*syms[i].slot = dlsym(lib, syms[i].name))) {
                        snprintf(err, errlen, "%s lacks %s", soname, syms[i].name);
                        for (size_t j = 0; j < n; j++)
                                *syms[j].slot = NULL;
                        dlclose(lib);
                        return NULL;
                }
        return lib;
}
