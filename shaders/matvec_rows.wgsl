// Rows g * NR .. g * NR + NR of the chunk; rows past it repeat its last row
// (their sums are not stored). The `mv_rows` of the plain and QKV outputs.
fn consecutive_rows(g: u32) -> vec4<u32> {
    return min(vec4<u32>(g * NR) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(p.a.y - 1u));
}
