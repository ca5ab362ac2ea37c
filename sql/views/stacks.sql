-- Python stacks: which frames are the user's code, and the call site of every stack.

-- Rules that decide, by a frame's file path, which Python frames are not the user's code when
-- finding a call site: a frame whose file matches any pattern (SQL LIKE) is skipped. Seeded with
-- torch's own files (relative `torch/...` as the profiler writes them, or absolute), code torch.compile
-- generated, `<...>` pseudo-files (`<frozen os>`, `<string>`), and absolute paths of installed
-- packages and the standard library (`.../site-packages/...`, `.../dist-packages/...`,
-- `.../lib/python3.11/...`). Any other path, relative or absolute, is the user's code unless
-- `stdlib_functions` says otherwise. The rows come from sql/reference/call_site_rules.csv; change
-- the rules for a session with INSERT or DELETE.
CREATE TABLE IF NOT EXISTS call_site_rules (
  -- LIKE pattern matched against stacks.file, e.g. 'torch/%'.
  pattern VARCHAR,
  -- Why frames matching the pattern are not call sites.
  reason VARCHAR
);

-- The standard library's functions, by file. The profiler writes a file relative to the sys.path
-- entry it was found under, so the standard library's copy.py is written `copy.py`, like a user's
-- own `copy.py` next to their script: a frame is the standard library's when its file is one of
-- these and its function is defined there (a user's `copy.py(3): save_weights` is a call site,
-- `copy.py(128): deepcopy` is not). A package directory named like a standard module (a user's
-- `code/model.py`) is not a file listed here. Rows come from Python 3.11's standard library
-- (tests and demos left out); add rows for a session to cover functions of other versions.
CREATE TABLE IF NOT EXISTS stdlib_functions (
  -- File relative to the standard library's directory, as the profiler writes it: 'copy.py', 'concurrent/futures/thread.py'.
  file VARCHAR,
  -- A function the file defines, or a code name it has ('<genexpr>', '<lambda>', '<listcomp>'); '<module>' is not listed.
  function VARCHAR
);

-- Call site and module path of every interned Python stack. The call site is the innermost frame
-- of the user's code: built-ins and `nn.Module: X` pseudo-frames (no file), frames whose file
-- matches `call_site_rules`, and frames of standard-library functions (`stdlib_functions`) are
-- skipped. The one place this rule lives.
-- @column run_id VARCHAR Run the stack belongs to.
-- @column stack_id BIGINT The stack (see `stacks`).
-- @column call_site VARCHAR Innermost user frame, `file(line): function`; NULL when the stack has none.
-- @column call_site_file VARCHAR File of the call site frame.
-- @column call_site_line BIGINT Line written in the call site frame (the function's def line for most frames).
-- @column module_path VARCHAR Chain of `nn.Module: X` frames, outermost first, joined by ' > '; NULL without with_modules.
CREATE OR REPLACE VIEW call_sites AS
WITH frames AS (
  SELECT s.run_id, s.stack_id, s.frame_index, s.frame, s.file, s.line,
         s.file IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM call_site_rules r WHERE s.file LIKE r.pattern)
           AND NOT EXISTS (SELECT 1 FROM stdlib_functions f WHERE f.file = s.file AND f.function = s.function)
           AS is_user
  FROM stacks s
)
SELECT run_id, stack_id,
       arg_min(frame, frame_index) FILTER (WHERE is_user) AS call_site,
       arg_min(file, frame_index) FILTER (WHERE is_user) AS call_site_file,
       arg_min(line, frame_index) FILTER (WHERE is_user) AS call_site_line,
       string_agg(replace(frame, 'nn.Module: ', ''), ' > ' ORDER BY frame_index DESC)
         FILTER (WHERE frame LIKE 'nn.Module: %') AS module_path
FROM frames
GROUP BY run_id, stack_id;

-- Who calls each stack's call site: the Python frames from the call site outward up to the first
-- frame of the user's code in another file (where a fix usually goes, e.g. the model's forward that
-- calls a helper in attn/indexer.py); in a stack whose user frames are all in one file, the next
-- user frame outward. Frames that are not the user's code (see `call_sites`) are passed over; a
-- call site with no user frame outside it has no caller.
-- @columns-as call_sites: run_id, stack_id, call_site
-- @column caller VARCHAR The first user frame outward from the call site in another file (else the next user frame), `file(line): function`.
-- @column caller_chain VARCHAR The user frames after the call site up to the caller, innermost first, joined by ' < '.
CREATE OR REPLACE VIEW call_chains AS
WITH frames AS (
  SELECT s.run_id, s.stack_id, s.frame_index, s.frame, s.file,
         s.file IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM call_site_rules r WHERE s.file LIKE r.pattern)
           AND NOT EXISTS (SELECT 1 FROM stdlib_functions f WHERE f.file = s.file AND f.function = s.function)
           AS is_user
  FROM stacks s
), user_frames AS (
  SELECT *, min(frame_index) OVER stack AS site_index, arg_min(file, frame_index) OVER stack AS site_file
  FROM frames WHERE is_user
  WINDOW stack AS (PARTITION BY run_id, stack_id)
), outward AS (
  SELECT *, coalesce(min(frame_index) FILTER (WHERE file <> site_file) OVER (PARTITION BY run_id, stack_id),
                     min(frame_index) FILTER (WHERE frame_index > site_index) OVER (PARTITION BY run_id, stack_id)) AS caller_index
  FROM user_frames
)
SELECT run_id, stack_id,
       arg_min(frame, frame_index) AS call_site,
       arg_min(frame, frame_index) FILTER (WHERE frame_index = caller_index) AS caller,
       string_agg(frame, ' < ' ORDER BY frame_index) FILTER (WHERE frame_index > site_index AND frame_index <= caller_index)
         AS caller_chain
FROM outward
GROUP BY run_id, stack_id;
