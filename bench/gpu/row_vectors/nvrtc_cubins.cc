// Compiles CUDA files to sm_90a cubins with NVRTC and Kiln's device library
// (the folder of kiln/*.cuh): nvrtc_cubins DEVICE_DIR FILE.cu... writes
// FILE.cubin beside each and prints ptxas's register count.
#include <nvrtc.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
std::string Read(const std::string& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}
int main(int argc, char** argv) {
  std::string dir = argv[1];
  std::vector<std::string> names, texts;
  for (auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back("kiln/" + e.path().filename().string());
    texts.push_back(Read(e.path()));
  }
  std::vector<const char*> n, t;
  for (size_t i = 0; i < names.size(); ++i) {
    n.push_back(names[i].c_str());
    t.push_back(texts[i].c_str());
  }
  for (int a = 2; a < argc; ++a) {
    std::string src = Read(argv[a]);
    nvrtcProgram p;
    nvrtcCreateProgram(&p, src.c_str(), argv[a], (int)n.size(), t.data(),
                       n.data());
    const char* o[] = {"--gpu-architecture=sm_90a", "-std=c++17", "-DNDEBUG",
                       "--ptxas-options=-v"};
    int rc = nvrtcCompileProgram(p, 4, o);
    size_t ls;
    nvrtcGetProgramLogSize(p, &ls);
    std::string log(ls, '\0');
    nvrtcGetProgramLog(p, log.data());
    printf("%s rc=%d %s\n", argv[a], rc, log.c_str());
    size_t cs = 0;
    nvrtcGetCUBINSize(p, &cs);
    std::string cub(cs, '\0');
    nvrtcGetCUBIN(p, cub.data());
    std::string out = std::string(argv[a]);
    out = out.substr(0, out.size() - 3) + ".cubin";
    std::ofstream(out, std::ios::binary) << cub;
    nvrtcDestroyProgram(&p);
  }
}
