// In progress on a branch; removed before anything lands.
