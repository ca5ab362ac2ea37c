-- Rules that decide which Python frames are not the user's code when finding a call site: a
-- frame whose file matches any pattern (SQL LIKE) is skipped. Seeded with torch itself,
-- `<...>` pseudo-files and interpreter paths; the standard library is in `stdlib_modules`.
-- Change the rule for a session with INSERT or DELETE on this table.
CREATE TABLE IF NOT EXISTS call_site_rules (
  -- LIKE pattern matched against stacks.file, e.g. 'torch/%'.
  pattern VARCHAR,
  -- Why frames matching the pattern are not call sites.
  reason VARCHAR
);

-- Python standard library top-level module names (from sys.stdlib_module_names): a frame whose
-- file's first path component is one of these (`typing.py`, `concurrent/futures/...`) is skipped.
CREATE TABLE IF NOT EXISTS stdlib_modules (
  -- Module name, e.g. 'contextlib'.
  name VARCHAR
);

-- Call site and module path of every interned Python stack. The call site is the innermost frame
-- of the user's code: built-ins and `nn.Module: X` pseudo-frames (no file), frames matching
-- `call_site_rules`, and standard-library frames are skipped. The one place this rule lives.
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
           AND regexp_replace(split_part(s.file, '/', 1), '\.py$', '') NOT IN (SELECT name FROM stdlib_modules)
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
