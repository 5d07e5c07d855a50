#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    dsh_session_mail_fuzz::read_render(data);
});
