#include <stdio.h>
#include "cxlpool.h"
int main(void) { printf("cxlpool %s\n", cxlp_version()); return 0; }
