// A flat JSON object written on one line (the bench and info output with --json).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace zbtool {

class JsonLine {
  public:
    JsonLine &add(const char *key, const std::string &v) { key_(key); quote_(v); return *this; }
    JsonLine &add(const char *key, const char *v) { return add(key, std::string(v)); }
    JsonLine &add(const char *key, bool v) { key_(key); s_ += v ? "true" : "false"; return *this; }
    JsonLine &add(const char *key, int v) { return add(key, (int64_t)v); }
    JsonLine &add(const char *key, uint64_t v) { key_(key); s_ += std::to_string(v); return *this; }
    JsonLine &add(const char *key, int64_t v) { key_(key); s_ += std::to_string(v); return *this; }
    // Non-finite numbers have no JSON form: they are written as null.
    JsonLine &add(const char *key, double v) {
        key_(key);
        if (!std::isfinite(v)) { s_ += "null"; return *this; }
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.17g", v);
        s_ += buf;
        return *this;
    }
    std::string str() const { return s_ + "}"; }

  private:
    void key_(const char *k) { s_ += s_.size() > 1 ? "," : ""; quote_(k); s_ += ":"; }
    void quote_(const std::string &v) {
        s_ += '"';
        for (char c : v) {
            if (c == '"' || c == '\\') { s_ += '\\'; s_ += c; }
            else if ((unsigned char)c < 0x20) { char b[8]; std::snprintf(b, sizeof b, "\\u%04x", c); s_ += b; }
            else s_ += c;
        }
        s_ += '"';
    }
    std::string s_ = "{";
};

}  // namespace zbtool
