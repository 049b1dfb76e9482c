"""memra_cuda_plugin: one GPU plugin .so built from plugins/cuda by nvcc for one arch.

nvcc is called by full path (--incompatible_strict_action_env hides PATH). Exact SASS
only (code=sm_XXa, no compute_XX PTX), cudart linked statically so the plugin runs
wherever a driver is, every symbol but the two entry points hidden."""

NVCC = "/usr/local/cuda/bin/nvcc"

def memra_cuda_plugin(name, plugin, arch, cc_major, cc_minor):
    gencode = "-gencode=arch=compute_%s,code=sm_%s" % (arch, arch)
    flags = " ".join([
        "-std=c++17",
        "-O3",
        "-I.",
        gencode,
        "-Werror all-warnings",
        "-Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra,-Werror",
        "-DMEMRA_CUDA_NAME=\\\"%s\\\"" % plugin,
        "-DMEMRA_CUDA_CC_MAJOR=%d" % cc_major,
        "-DMEMRA_CUDA_CC_MINOR=%d" % cc_minor,
    ])
    native.genrule(
        name = name,
        srcs = [
            "//plugins/cuda:cu_srcs",
            "//plugins/cuda:c_srcs",
            "//plugins/cuda:hdrs",
        ],
        outs = ["libmemra_%s.so" % plugin],
        cmd = " ".join([
            "set -e; T=$$(mktemp -d); trap 'rm -rf $$T' EXIT;",
            "for f in $(locations //plugins/cuda:cu_srcs); do",
            "  %s %s -c $$f -o $$T/$$(basename $$f).o;" % (NVCC, flags),
            "done;",
            "%s %s -x c -c $(location //plugins/cuda:c_srcs) -o $$T/probe.o;" % (NVCC, flags),
            "%s -shared -cudart static %s -Xlinker --exclude-libs,ALL $$T/*.o -o $@" % (NVCC, gencode),
        ]),
        visibility = ["//visibility:public"],
    )
