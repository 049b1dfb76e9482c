"""memra_cuda_plugin: one GPU plugin .so built from plugins/cuda by nvcc for one arch.

Called from plugins/cuda/BUILD (so the sources can be globbed there): one genrule per .cu
file makes its object, so editing one kernel file recompiles only that file; one genrule
links them. backends/<arch>/BUILD copies the result under its own name.

nvcc is called by full path (--incompatible_strict_action_env hides PATH). Exact SASS
only (code=sm_XXa, no compute_XX PTX), cudart linked statically so the plugin runs
wherever a driver is, every symbol but the two entry points hidden."""

NVCC = "/usr/local/cuda/bin/nvcc"

def _flags(plugin, arch, cc_major, cc_minor, defines):
    return " ".join([
        "-std=c++17",
        "-O3",
        "-I.",
        "-gencode=arch=compute_%s,code=sm_%s" % (arch, arch),
        "-Werror all-warnings",
        "-Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra,-Werror",
        "-DMEMRA_CUDA_NAME=\\\"%s\\\"" % plugin,
        "-DMEMRA_CUDA_CC_MAJOR=%d" % cc_major,
        "-DMEMRA_CUDA_CC_MINOR=%d" % cc_minor,
    ] + ["-D%s" % d for d in defines])

def memra_cuda_plugin(name, plugin, arch, cc_major, cc_minor, cu_srcs, c_srcs, hdrs, defines = []):
    """Targets: <name>_<file>_o per source and <name> (the .so, under lib_<name>/).

    defines: extra preprocessor macros (NAME or NAME=VALUE), e.g. the plugin family
    (MEMRA_CUDA_FAMILY_SM120=1) that selects code paths independently of the compile arch,
    so a test build of the sm120a sources for sm_90a runs the sm120a paths on an H200."""
    flags = _flags(plugin, arch, cc_major, cc_minor, defines)
    objs = []
    for src in cu_srcs + c_srcs:
        obj = "%s_%s_o" % (name, src.replace(".", "_"))
        lang = "-x c " if src.endswith(".c") else ""
        native.genrule(
            name = obj,
            srcs = [src] + hdrs,
            outs = ["obj_%s/%s.o" % (name, src)],
            # nvcc names its temporary files after its PID, and sandboxed actions run in
            # their own PID namespaces under one /tmp: two nvcc processes with the same PID
            # clobbered each other's preprocessed files (seen: "missing closing quote" deep
            # in cuda_fp16.h). Each call gets its own TMPDIR.
            cmd = ("T=$$(mktemp -d) && TMPDIR=$$T %s %s %s-c $(location %s) -o $@; " +
                   "r=$$?; rm -rf $$T; exit $$r") % (NVCC, flags, lang, src),
        )
        objs.append(":" + obj)
    native.genrule(
        name = name,
        srcs = objs,
        outs = ["lib_%s/libmemra_%s.so" % (name, plugin)],
        cmd = "%s -shared -cudart static -gencode=arch=compute_%s,code=sm_%s " % (NVCC, arch, arch) +
              "-Xlinker --exclude-libs,ALL $(SRCS) -o $@",
        visibility = ["//visibility:public"],
    )
