-- sample.sql: sample rows for segment mode; works on MySQL, MariaDB and SQLite.
-- leaf-segment-test is Leaf's own sample row; demo is leafd's.
INSERT INTO leaf_alloc (biz_tag, max_id, step, description)
VALUES ('leaf-segment-test', 1, 2000, 'Test leaf Segment Mode Get Id');
INSERT INTO leaf_alloc (biz_tag, max_id, step, description)
VALUES ('demo', 1, 1000, 'leafd demo tag');
