/* fuzz_backup: a backup file through the one reader of it (proto/backup.c),
 * as `gadgetctl restore` hands gadgetd a file that may come from anywhere
 * and `gadgetctl export` prints one: the header, then every record checked
 * (bounds, order, each value as a Value) until the end's counts and
 * checksum, or the first refusal. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backup.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct input {
        const uint8_t *p;
        size_t left;
};

static int take(void *arg, void *buf, size_t n)
{
        struct input *in = arg;
        if (n > in->left)
                return -ENODATA;
        memcpy(buf, in->p, n);
        in->p += n;
        in->left -= n;
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct input in = { data, size };
        struct backup_info info;
        struct backup_reader *r = NULL;
        struct backup_record rec;
        char why[256];
        if (backup_reader_new(take, &in, &info, &r, why, sizeof why) < 0)
                return 0;
        while (backup_read(r, &rec, &info, why, sizeof why) == 1)
                ;
        backup_reader_free(r);
        return 0;
}
